/**
 * How long a Fastly sandbox may be reused (see sandbox-reuse.ts): at most 1,000 requests, and not
 * once its heap has passed 64 MiB (the caches it keeps are bounded well below that). Apart from
 * the `fastly:experimental` call so that Node code (the bench) can read them.
 */
export const SANDBOX_REUSE = { maxRequests: 1000, maxMemoryMiB: 64 } as const;
