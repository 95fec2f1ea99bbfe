/// <reference types="@fastly/js-compute" />
/**
 * The code-size floor of the wasm, for the bench's latency pass: the waiting room's whole bundle,
 * parsed and warmed up when the wasm is built exactly as bin/main.wasm's is, behind the bare proxy's
 * one-line handler. Served beside the bare proxy and the room on the same Compute host, it shows
 * how much of an admitted visitor's cost is the larger memory every instance starts from, before the
 * room does anything. `node src/node/build.mjs fastly-floor --out DIR` builds it. It asks for
 * reusable sandboxes as bin/main.wasm does, so that it is compared with it in both of a host's modes.
 */
import { handleFastlyRequest } from '../../src/platform/fastly';
import '../../src/platform/build-time';
import { enableSandboxReuse } from '../../src/platform/sandbox-reuse';

enableSandboxReuse();

// Kept reachable, so the bundler keeps the room's code in the bundle; never called.
(globalThis as { waitingRoom?: unknown }).waitingRoom = handleFastlyRequest;

addEventListener('fetch', (event) => event.respondWith(fetch(event.request, { backend: 'origin' })));
