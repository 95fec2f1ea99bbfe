/**
 * The hosts' request logs: what a store failure looked like from inside. Every host's log is kept
 * (the Node hosts: their records, in memory; the Compute hosts: their `wr_log :: {json}` lines and
 * their own error lines), and so are the counting proxy's failures: a failing pass prints them, and
 * the report ends with every host's count of them.
 */
import type { RequestLog } from '../../src/core/ports';
import { log, sleep } from './util';

/** A request that met a store failure: a `store_error`, an `unavailable…` decision, or a 5xx answer. */
function isTrouble(r: RequestLog): boolean {
  return r.store_error !== undefined || r.status >= 500 || r.decision.startsWith('unavailable');
}

/** One host's (or the counting proxy's) account of its store failures, for the report and for a failing pass. */
export interface TroubleSource {
  readonly name: string;
  /** Lines describing what went wrong so far; empty when nothing did. */
  report(): string[];
  /** One line: how much was logged, how much of it went wrong. */
  summary(): string;
}

/** The lines of a set of troubled request records: each distinct store_error/reason with its count, then the first few requests. */
function troubleLines(name: string, records: readonly RequestLog[], logged: number): string[] {
  if (records.length === 0) return [];
  const kinds = new Map<string, number>();
  for (const r of records) {
    const key = `store_error ${JSON.stringify(r.store_error ?? null)}, reason ${JSON.stringify(r.reason ?? null)}, decision ${r.decision}, status ${r.status}`;
    kinds.set(key, (kinds.get(key) ?? 0) + 1);
  }
  const shown = 8;
  return [
    `${name}: ${records.length} of ${logged} logged request(s) met a store failure: ${[...kinds].map(([k, n]) => `${n}× (${k})`).join('; ')}`,
    ...records
      .slice(0, shown)
      .map(
        (r) =>
          `    ${r.ts} ${r.method} ${r.path} → ${r.status} ${r.decision}` +
          `${r.reason !== undefined ? ` reason=${JSON.stringify(r.reason)}` : ''}` +
          `${r.store_error !== undefined ? ` store_error=${JSON.stringify(r.store_error)}` : ''}` +
          `${r.store_ms !== undefined ? ` store_ms=${r.store_ms}` : ''}`,
      ),
    ...(records.length > shown ? [`    … and ${records.length - shown} more`] : []),
  ];
}

/** A request log kept in memory: every record counted, the troubled ones kept; and the host's own error lines. */
export class RequestLogKeeper implements TroubleSource {
  #logged = 0;
  readonly #trouble: RequestLog[] = [];
  /** The host's own error lines (a Compute host's stderr: a wasm trap, a backend error), the first ones. */
  readonly #hostLines: string[] = [];
  #hostLinesSeen = 0;
  /** The engine's vCPU time (`vcpu_ms`, the Fastly adapter's log field) of each record, in order. */
  readonly #vcpu: { decision: string; ms: number }[] = [];
  /** Records of a poll the per-POP state cache could not answer (`cache: miss`): each one asked the store. */
  #cacheMisses = 0;
  constructor(readonly name: string) {}
  add(record: RequestLog): void {
    this.#logged++;
    if (record.cache === 'miss') this.#cacheMisses++;
    const vcpu = (record as { vcpu_ms?: unknown }).vcpu_ms;
    if (typeof vcpu === 'number') this.#vcpu.push({ decision: record.decision, ms: vcpu });
    if (isTrouble(record)) this.#trouble.push(record);
  }
  /** How many records carried a vCPU time so far: a mark for vcpuSince. */
  vcpuCount(): number {
    return this.#vcpu.length;
  }
  /** The vCPU times logged since `mark`, with each request's decision. */
  vcpuSince(mark: number): readonly { decision: string; ms: number }[] {
    return this.#vcpu.slice(mark);
  }
  /** Polls so far that the state cache did not answer (see #cacheMisses). */
  cacheMisses(): number {
    return this.#cacheMisses;
  }
  /** Requests so far that met a store failure. */
  troubleCount(): number {
    return this.#trouble.length;
  }
  addHostLine(line: string): void {
    this.#hostLinesSeen++;
    if (this.#hostLines.length < 20) this.#hostLines.push(line.slice(0, 500));
  }
  /** A Logger for a Node host: nothing printed, nothing kept but the troubled records (a push, off the measured path's cost). */
  get logger(): { log: (record: RequestLog) => void } {
    return { log: (record) => this.add(record) };
  }
  report(): string[] {
    const rpcFault = this.#hostLines.some((line) => /rpc \w+: no reply/.test(line));
    return [
      ...(rpcFault
        ? [
            `${this.name}: DIAGNOSIS: the Compute host stand-in lost a reply between its worker and main threads ("rpc …: no reply"). ` +
              'Its worker waits with Atomics.wait and takes the reply with receiveMessageOnPort; the main thread posts the reply, stores the ' +
              'flag, then notifies. When the worker finds the flag already set, takes the reply and reaches its next rpc before that ' +
              'notify runs (both threads preempted at the wrong moments, a loaded 2-CPU machine), the late notify wakes the next wait ' +
              'with no reply yet: that hostcall fails (a body read: a store error; async_select: a trap, "wasm trapped"), and every later ' +
              'rpc of that worker gets the previous one\'s reply ("Invalid handle", "Generic error"). A fault of the stand-in, not of ' +
              'the waiting room: the store errors and traps of this host after it are its consequences.',
          ]
        : []),
      ...troubleLines(this.name, this.#trouble, this.#logged),
      ...(this.#hostLinesSeen === 0 ? [] : [`${this.name}: ${this.#hostLinesSeen} error line(s) from the host itself:`, ...this.#hostLines.map((l) => `    ${l}`)]),
      ...(this.#hostLinesSeen > this.#hostLines.length ? [`    … and ${this.#hostLinesSeen - this.#hostLines.length} more`] : []),
    ];
  }
  summary(): string {
    return (
      `${this.name}: ${this.#logged} requests logged, ${this.#trouble.length} met a store failure` +
      (this.#hostLinesSeen > 0 ? `; ${this.#hostLinesSeen} error line(s) from the host` : '')
    );
  }
}

/** Prints a source's troubles now (on stderr), for a pass that just failed; returns them for the report. */
export async function printTrouble(what: string, sources: readonly TroubleSource[]): Promise<string[]> {
  // The Compute host prints its log lines from another process: give the failing request's line time to arrive.
  await sleep(300);
  const lines = sources.flatMap((source) => source.report());
  if (lines.length === 0) lines.push(`${sources.map((source) => source.name).join(', ')}: no request met a store failure (nothing in the log explains ${what})`);
  for (const line of lines) log(`${what}: ${line}`);
  return lines;
}


/** The report's last section: every log's summary and every failure in them; any failure fails the run. */
export function troubleReport(sources: readonly TroubleSource[]): { text: string; details: string[] } {
  const details = sources.flatMap((source) => source.report());
  const text = [
    '### Store failures seen by the hosts',
    '',
    'Every request log of the run: the Node hosts\' records (kept in memory, nothing printed) and the Compute hosts\' `wr_log :: {json}` ' +
      'lines on their stdout; a request counts here when it has a `store_error`, an `unavailable…` decision or a 5xx answer. The ' +
      'counting proxy in front of the wasm harness\'s bridge reports its own failures (a forward that failed, on a reused keep-alive ' +
      'socket or a new one; a client connection closed early; a 5xx from the bridge). Any of them fails the run: with ' +
      'store_failure=hold a poll that met a store failure still gets a holding page and a renewed waiting cookie.',
    ...sources.map((source) => `- ${source.summary()}`),
    ...(details.length > 0 ? ['', '```', ...details, '```'] : []),
    '',
  ].join('\n');
  return { text, details };
}
