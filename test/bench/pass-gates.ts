/**
 * The gates pass: what the bot defences cost the edge, beside a new visitor with no gate, on both
 * arms, one request at a time. Four classes of new visitors:
 *   - no gate (MAIN_ROOM): the ticket, one store call;
 *   - a proof of work asked (GATED_ROOM, no solution): the challenge, no store call;
 *   - a proof of work verified (GATED_ROOM, a solution found beforehand with node:crypto, outside
 *     the timing): one signature check and one SHA-256, then the ticket, one store call;
 *   - refused by the per-client ticket limit (LIMITED_ROOM, after its one allowed ticket): 429, no
 *     store call.
 * Each class's store calls are counted between snapshots and must be 1, 0, 1, 0 per request (a
 * class over fails the run). Latency is the median over the class; on the wasm the engine's vCPU
 * time from the log (on the stand-in, its wall time so far). On the Node arm the verification and
 * the refusal are also timed in-process, without HTTP: what the CPU pays for each.
 */
import { createHash } from 'node:crypto';
import { parseSecrets } from '../../src/core/config';
import { checkSolution, issueChallenge, spentOnce } from '../../src/core/proof-of-work';
import { allowNewTicket } from '../../src/core/ticket-limit';
import { MemoryStateCache } from '../../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../../src/platform/memory-limiter';
import { readLocalConfig } from '../../src/platform/node';
import { table } from '../support/markdown-table';
import { MAIN_ROOM, microsPerCall, sequentialClass, type Arm, type ArmName, type BilledRow, type Pass, type RoomHost, type RoomSpec, type SequentialResult } from './harness';
import { cookieFrom, findProjectFile, log, ms, PATH, send, type Reply } from './util';

/** The difficulty measured: the suggested start in docs/bots.md. */
const DIFFICULTY = 14;
/** Requests per class (fewer on the wasm: every request instantiates it). */
const PER_CLASS: Readonly<Record<ArmName, number>> = { node: 100, wasm: 30 };
/** In-process repetitions of each CPU measurement on the Node arm (each verification needs a solution found first: 2^14 hashes). */
const CPU_REPEATS = 500;

const GATED_ROOM: RoomSpec = {
  variant: 'gated',
  overrides: { queue_name: 'bench-gated', admit_per_period: '0', state_cache_seconds: '0', pow_difficulty: String(DIFFICULTY) },
  nodeLogName: 'node proof-of-work waiting room (gates pass)',
  sockets: { node: 1, wasm: 1 },
};
const LIMITED_ROOM: RoomSpec = {
  variant: 'limited',
  overrides: { queue_name: 'bench-limited', admit_per_period: '0', state_cache_seconds: '0', ticket_limit: '1', ticket_window_seconds: '60', ticket_penalty_minutes: '5' },
  nodeLogName: 'node ticket-limited waiting room (gates pass)',
  sockets: { node: 1, wasm: 1 },
};

/** Store calls per request each class may make: the budgets of issue 14. */
const CLASSES = [
  { key: 'plain', label: 'new visitor, no gate: a ticket', storeCalls: 1 },
  { key: 'asked', label: 'new visitor without a proof of work: a challenge', storeCalls: 0 },
  { key: 'verified', label: `new visitor with a proof of work (${DIFFICULTY} bits): verified, a ticket`, storeCalls: 1 },
  { key: 'refused', label: 'new visitor over the ticket limit: refused (429)', storeCalls: 0 },
] as const;
type ClassKey = (typeof CLASSES)[number]['key'];

type ClassResult = SequentialResult;

interface CpuResult {
  readonly verifyUs: number;
  readonly issueUs: number;
  readonly refuseUs: number;
}

function leadingZeroBits(digest: Buffer): number {
  let bits = 0;
  for (const byte of digest) {
    if (byte !== 0) return bits + Math.clz32(byte) - 24;
    bits += 8;
  }
  return bits;
}

function solve(nonce: string, difficulty: number): number {
  for (let c = 0; ; c++) if (leadingZeroBits(createHash('sha256').update(`${nonce}:${c}`).digest()) >= difficulty) return c;
}

const JSON_ACCEPT = { accept: 'application/json' };

/** A challenge for the next request, solved: the cookie value `<challenge>~<c>`. */
async function solvedChallenge(host: RoomHost): Promise<string> {
  const r = await send(host.agent, 'GET', `${host.url}${PATH}`, JSON_ACCEPT);
  const body = JSON.parse(r.body) as { status?: string; challenge?: string; nonce?: string; difficulty?: number };
  if (body.status !== 'challenge' || body.challenge === undefined || body.nonce === undefined) throw new Error(`gates: expected a challenge, got ${r.status} ${r.body.slice(0, 200)}`);
  return `${body.challenge}~${solve(body.nonce, body.difficulty ?? DIFFICULTY)}`;
}

/** Times `n` requests, each with the headers `prepare` makes beforehand (untimed), one at a time. */
async function measure(arm: Arm, host: RoomHost, n: number, prepare: () => Promise<Record<string, string>>, check: (r: Reply) => boolean, what: string): Promise<ClassResult> {
  const headers: Record<string, string>[] = [];
  for (let i = 0; i < n; i++) headers.push({ ...JSON_ACCEPT, ...(await prepare()) });
  return sequentialClass(arm, host, headers, check, `gates, ${what}`);
}

/** The Node arm's CPU cost of a verification, a challenge and a refusal, in-process (µs, medians of batches). */
async function cpuCosts(): Promise<CpuResult> {
  const local = readLocalConfig(findProjectFile('devconfig.json'));
  const ring = parseSecrets(local.secrets).keyRing;
  const settings = { queueName: 'bench', powDifficulty: DIFFICULTY, clientIpv4Prefix: 32 as const, cookieName: 'waiting_room' };
  let now = Date.now();
  const clock = { now: () => now };
  const spent = spentOnce(new MemoryStateCache(clock), settings.queueName);
  const solutions: string[] = [];
  for (let i = 0; i < CPU_REPEATS; i++) {
    const c = await issueChallenge(ring, settings, '192.0.2.1', now);
    solutions.push(`${c.challenge}~${solve(c.nonce, DIFFICULTY)}`);
  }
  const batch = (run: (i: number) => Promise<unknown>) => microsPerCall(CPU_REPEATS, run);
  const verifyUs = await batch(async (i) => {
    const result = await checkSolution(ring, settings, spent, solutions[i], '192.0.2.1', now);
    if (!result.ok) throw new Error(`gates: a solution was refused in-process: ${result.reason}`);
  });
  const issueUs = await batch(() => issueChallenge(ring, settings, '192.0.2.1', now));
  const limiter = new MemoryFailureLimiter(clock);
  const limitSettings = { queueName: 'bench', ticketLimit: 1, ticketWindowSeconds: 60 as const, ticketPenaltyMinutes: 5, clientIpv4Prefix: 32 as const };
  await allowNewTicket(limiter, limitSettings, '192.0.2.1', {});
  await allowNewTicket(limiter, limitSettings, '192.0.2.1', {});
  const refuseUs = await batch(async () => {
    const allowance = await allowNewTicket(limiter, limitSettings, '192.0.2.1', {});
    if (allowance.ok) throw new Error('gates: a held client was allowed in-process');
  });
  now += 1;
  return { verifyUs, issueUs, refuseUs };
}

export function gatesPass(): Pass {
  const results: Partial<Record<ArmName, Record<ClassKey, ClassResult>>> = {};
  let cpu: CpuResult | undefined;
  return {
    name: 'gates',
    async prepare(arm: Arm) {
      await Promise.all([arm.host(MAIN_ROOM), arm.host(GATED_ROOM), arm.host(LIMITED_ROOM)]);
    },
    async run(arm: Arm) {
      const n = PER_CLASS[arm.name];
      log(`${arm.name}: the gates' cost per new visitor (${n} per class, one at a time)`);
      const [plain, gated, limited] = await Promise.all([arm.host(MAIN_ROOM), arm.host(GATED_ROOM), arm.host(LIMITED_ROOM)]);
      const ticketed = (name: string) => (r: Reply) => r.status === plain.config.holdStatus && cookieFrom(r, name) !== undefined;
      const byClass: Partial<Record<ClassKey, ClassResult>> = {};
      byClass.plain = await measure(arm, plain, n, async () => ({}), ticketed(plain.config.cookieName), 'no gate');
      byClass.asked = await measure(arm, gated, n, async () => ({}), (r) => r.status === 200 && r.body.includes('"challenge"'), 'challenge');
      byClass.verified = await measure(arm, gated, n, async () => ({ cookie: `waiting_room_pow=${await solvedChallenge(gated)}` }), ticketed(gated.config.cookieName), 'verified');
      // The one allowed ticket, then the client is held: every request after it is refused.
      await send(limited.agent, 'GET', `${limited.url}${PATH}`, JSON_ACCEPT);
      byClass.refused = await measure(arm, limited, n, async () => ({}), (r) => r.status === 429, 'refused');
      results[arm.name] = byClass as Record<ClassKey, ClassResult>;
      if (arm.name === 'node') cpu = await cpuCosts();
    },
    report(wasm) {
      const node = results.node;
      if (node === undefined) throw new Error('gates pass: the node arm did not run');
      const failures: string[] = [];
      const billed: BilledRow[] = [];
      const rows: string[][] = [];
      for (const c of CLASSES) {
        const cells: string[] = [c.label, String(c.storeCalls)];
        for (const armName of ['node', 'wasm'] as const) {
          const r = results[armName]?.[c.key];
          if (r === undefined) {
            cells.push(...(armName === 'wasm' ? ['—', '—', '—', '—'] : ['—', '—', '—']));
            continue;
          }
          const calls = r.counts.http / r.requests;
          if (r.counts.http > c.storeCalls * r.requests) failures.push(`gates, ${armName}, ${c.label}: ${calls.toFixed(2)} store calls per request, budget ${c.storeCalls}`);
          const base = results[armName]!.plain.p50Ms;
          cells.push(`${calls.toFixed(2)} · ${(r.counts.billed / r.requests).toFixed(2)}`, ms(r.p50Ms), c.key === 'plain' ? '—' : `${r.p50Ms - base >= 0 ? '+' : ''}${ms(r.p50Ms - base)}`);
          if (armName === 'wasm') cells.push(r.vcpuMs === undefined ? '—' : ms(r.vcpuMs));
          billed.push({ pass: 'gates', arm: armName, label: c.label, requests: r.requests, counts: r.counts, billedBudget: c.storeCalls === 0 ? 0 : undefined });
        }
        rows.push(cells);
      }
      const wasmNote =
        wasm.kind === 'ran' ? '' : wasm.kind === 'skipped' ? ` The wasm columns are empty: ${wasm.reason}.` : ' The wasm arm failed (see above).';
      const text = [
        `### What the bot defences cost the edge (one request at a time; proof of work at ${DIFFICULTY} bits)`,
        '',
        table(
          ['request class', 'store calls allowed', 'node: store calls · billed per request', 'node: p50 ms', 'node: vs no gate', 'wasm: store calls · billed', 'wasm: p50 ms', 'wasm: vs no gate', 'wasm: vCPU ms (stand-in: wall)'],
          ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          rows,
        ),
        '',
        cpu === undefined
          ? ''
          : `In-process on the Node arm (no HTTP; medians of 10 batches of ${CPU_REPEATS / 10}): verifying a solution ${cpu.verifyUs.toFixed(1)} µs ` +
            `(signature check, SHA-256, the spent-nonce check), issuing a challenge ${cpu.issueUs.toFixed(1)} µs (128 random bits, a signature), ` +
            `refusing a held client ${cpu.refuseUs.toFixed(1)} µs (one penalty-box lookup).`,
        `Store calls are counted between snapshots; the classes of no ticket must make none, and a ticket one, as without a gate.${wasmNote}`,
        '',
      ].join('\n');
      return { text, failures, billed };
    },
  };
}
