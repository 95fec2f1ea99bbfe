/**
 * Reusable sandboxes: one Fastly sandbox may serve many requests, one after another, instead of
 * one (js-compute's default). Asked for while the wasm is built, the only time the engine allows it.
 *
 * Why: a fresh sandbox per request redoes, for every admitted visitor, what this code keeps per
 * instance: the settings item parsed and checked, the service built, the signing keys derived, the
 * visitor's token verified and its carried admission checked (measured in the engine on the Compute
 * host stand-in: ~3 ms of an admitted visitor's ~4 ms of room work; docs/benchmarks.md). A reused
 * sandbox keeps all of it, and starts no new instance.
 *
 * What makes it safe here: the core already runs long-lived on the Node host, many requests at a
 * time; what the Fastly platform code keeps per instance is keyed by what it was made from (the
 * settings item's text; the key ring, read from the Secret Store by every request; the Upstash
 * client by the token its request's first store call reads), and it keeps no handle from one
 * request for the next (stores, log endpoint and KV Store are opened by the request that uses them).
 *
 * Limits: a sandbox is recycled after 1,000 requests or once its heap passes 64 MiB (the caches it
 * keeps are bounded well below that), whichever comes first; Fastly decides how long an idle one
 * waits. `WR_SANDBOX_REUSE=0` when building turns it off (one sandbox per request, as before).
 * Hosts that cannot reuse sandboxes (Viceroy's stand-in here) serve one request per instance as
 * before: the runtime asks them for a next request, they have none to give.
 */
import { setReusableSandboxOptions } from 'fastly:experimental';
import { SANDBOX_REUSE } from './sandbox-reuse-options';

// A build-time constant (src/node/build.mjs): SANDBOX_REUSE.maxMemoryMiB unless WR_SANDBOX_MAX_MEMORY_MIB says otherwise.
declare const WR_SANDBOX_MAX_MEMORY_MIB: number | undefined;

/** Call at module top level, while the wasm is built. */
export function enableSandboxReuse(): void {
  setReusableSandboxOptions({ ...SANDBOX_REUSE, maxMemoryMiB: WR_SANDBOX_MAX_MEMORY_MIB ?? SANDBOX_REUSE.maxMemoryMiB });
}
