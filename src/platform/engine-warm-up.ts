/**
 * Work done once at build time so that no request pays it. `js-compute-runtime` runs the module's
 * top-level code inside the engine when it builds bin/main.wasm and keeps the resulting memory as
 * the wasm's initial state; every request starts from that state (a fresh instance each time,
 * unless the service reuses sandboxes). What the engine initialises lazily on first use is then
 * already initialised.
 *
 * The crypto library is the one that matters: the first HMAC an instance computes set it up, 2.2 ms
 * of an admitted visitor's 13 ms wasm run on the Compute host stand-in (the next HMAC took 0.1 ms).
 * Every visitor's token check makes one, so it is made here with a throwaway key. Nothing here may
 * make a hostcall (none exist at build time), and nothing it computes is kept.
 */
const WARM_UP_KEY = new TextEncoder().encode('engine warm-up: not a secret, signs nothing that is kept');

export const engineWarmUp: Promise<void> = crypto.subtle
  .importKey('raw', WARM_UP_KEY, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify'])
  .then(async (key) => {
    const data = new TextEncoder().encode('wr/v1/warm-up');
    const mac = await crypto.subtle.sign('HMAC', key, data);
    await crypto.subtle.verify('HMAC', key, mac, data);
    await crypto.subtle.importKey('raw', mac, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
  })
  // A warm-up that fails costs the first request its time, nothing else.
  .catch(() => undefined);
