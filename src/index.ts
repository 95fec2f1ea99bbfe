/// <reference types="@fastly/js-compute" />
// Fastly entry: the fetch listener and a last-resort 500. Everything else lives in src/core.
import { errorResponse } from './core/http';
import { handleFastlyRequest } from './platform/fastly';
// Build-time only: initialises the engine's crypto in the snapshot every request starts from.
import './platform/engine-warm-up';

addEventListener('fetch', (event) =>
  event.respondWith(
    handleFastlyRequest(event).catch((error: unknown) => {
      console.error(`waiting room: unhandled error: ${error instanceof Error ? error.stack : String(error)}`);
      return errorResponse(500, 'internal error');
    }),
  ),
);
