/**
 * The part of @upstash/redis's shared chunk that src/store/upstash-http.ts uses. The package does
 * not export it by name: the builds and the tests map the specifier to the chunk's file (see
 * src/node/upstash-chunk.mjs). Typed from the chunk's source of the pinned release (1.39.0).
 */
declare module '@upstash/redis/http-client' {
  export interface UpstashRequest {
    readonly body?: unknown;
    readonly upstashSyncToken?: string;
  }
  export interface UpstashResponse<T> {
    readonly result?: T;
    readonly error?: string;
  }
  export class HttpClient {
    constructor(config: {
      readonly baseUrl: string;
      readonly headers?: Record<string, string>;
      readonly retry?: { readonly retries?: number; readonly backoff?: (retryCount: number) => number } | false;
      readonly responseEncoding?: false | 'base64';
      readonly keepAlive?: boolean;
      readonly readYourWrites?: boolean;
      /** Fastly: the backend every request is sent to. */
      readonly options?: { readonly backend?: string };
    });
    upstashSyncToken: string;
    request<T>(request: UpstashRequest): Promise<UpstashResponse<T>>;
  }
  export const error_exports: {
    readonly UpstashError: new (message: string) => Error;
  };
}
