/// <reference types="@fastly/js-compute" />
// Fastly entry: the fetch listener and a last-resort 500. Everything else lives in src/core.
import { errorResponse } from './core/http';
import { handleFastlyRequest } from './platform/fastly';
// Build-time only: the engine's crypto initialised, one admitted visitor run through the core, and
// the freed memory they leave zeroed, in the snapshot every request starts from.
import './platform/build-time';
import { enableSandboxReuse } from './platform/sandbox-reuse';

// A build-time constant (src/node/build.mjs): WR_SANDBOX_REUSE=0 builds a wasm that serves one request per sandbox.
declare const WR_SANDBOX_REUSE: boolean;
if (WR_SANDBOX_REUSE) enableSandboxReuse();

addEventListener('fetch', (event) =>
  event.respondWith(
    handleFastlyRequest(event).catch((error: unknown) => {
      console.error(`waiting room: unhandled error: ${error instanceof Error ? error.stack : String(error)}`);
      return errorResponse(500, 'internal error');
    }),
  ),
);
