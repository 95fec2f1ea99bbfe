/**
 * Ports: the narrow interfaces the core needs from the outside world. The Fastly adapter and the
 * Node host each implement them; tests implement them to inject faults and time.
 */

/** What the store knows about one queue. Ticket `t` may enter once `t <= cursor`. */
export interface QueueState {
  /** The last ticket handed out (0 before the first visitor). */
  readonly tail: number;
  /** The highest ticket let in (0 before anyone is let in). */
  readonly cursor: number;
}

/**
 * Automatic admission: the first request of each period moves the cursor by `count`, but never
 * further than `count` past the tail, so quiet periods do not bank admissions.
 */
export interface AutoAdmission {
  /** Visitors let in per period; 0 turns automatic admission off. */
  readonly count: number;
  /** Length of a period in milliseconds. */
  readonly periodMs: number;
}

export interface JoinResult extends QueueState {
  /** The ticket just taken: unique and contiguous across all callers. */
  readonly ticket: number;
}

export interface AdmitResult extends QueueState {
  /** How many tickets this call let in (the cursor never passes the tail on a manual admit). */
  readonly admitted: number;
}

/**
 * The queue's shared state. Every method is one round trip and atomic in the store. Methods throw
 * when the store fails; the core turns that into a decision (see `store_failure`).
 */
export interface QueueStore {
  /** Take the next ticket (atomic increment of the tail) and run automatic admission. */
  join(queue: string, nowMs: number, auto: AutoAdmission): Promise<JoinResult>;
  /** Read tail and cursor and run automatic admission. */
  poll(queue: string, nowMs: number, auto: AutoAdmission): Promise<QueueState>;
  /** Let up to `count` waiting visitors in: the cursor moves by `count` but not past the tail. */
  admit(queue: string, count: number): Promise<AdmitResult>;
  /** Read tail and cursor without side effects. */
  peek(queue: string): Promise<QueueState>;
}

/**
 * The per-POP cache of a queue's read state: on Fastly the POP's cache (`fastly:cache`), on the
 * Node host process memory. Waiting visitors' polls are answered from it, so store load follows
 * arrivals and admissions, not the size of the crowd.
 */
export interface StateCache {
  /**
   * The value cached under `key` while it is younger than `ttlSeconds`; otherwise `load()` runs
   * (once for all concurrent callers in this POP) and its value is cached. A `load` that throws
   * caches nothing and its error reaches every caller that waited for it.
   */
  getOrLoad<T>(key: string, ttlSeconds: number, load: () => Promise<T>): Promise<{ readonly value: T; readonly hit: boolean }>;
}

/** Forwards a request to the origin and returns its response, streamed. */
export interface Origin {
  forward(request: Request): Promise<Response>;
}

/** One structured record per request. */
export interface RequestLog {
  readonly ts: string;
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly decision: string;
  readonly queue?: string;
  readonly ticket?: number;
  readonly cursor?: number;
  readonly tail?: number;
  readonly store_ms?: number;
  /** `hit` when a waiting visitor's poll was answered from the per-POP cache, `miss` when it asked the store. */
  readonly cache?: 'hit' | 'miss';
  readonly store_error?: string;
  readonly pop?: string;
  readonly reason?: string;
}

export interface Logger {
  log(record: RequestLog): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** Facts about the client that only the platform knows. */
export interface ClientInfo {
  /** The client's IP address as text (IPv4 or IPv6), or undefined when unknown. */
  readonly address: string | undefined;
  /** Name of the point of presence serving the request, for logs. */
  readonly pop: string | undefined;
}
