/**
 * The CPU time this process spends on `run`, in ms. For the sanity bounds of tests that guard
 * against unbounded work (a quadratic parse of a hostile header): unlike a stopwatch, it does not
 * grow when other processes keep the machine's cores busy, so such a bound is about our work and
 * not about the machine's load. Keep the bound orders of magnitude above the measured time.
 */
export function cpuTimeMs<T>(run: () => T): { readonly value: T; readonly ms: number } {
  const before = process.cpuUsage();
  const value = run();
  const used = process.cpuUsage(before);
  return { value, ms: (used.user + used.system) / 1000 };
}
