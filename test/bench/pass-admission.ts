/**
 * The admission pass: what the signed admission (src/core/admission.ts) costs an admitted visitor's
 * request, side by side on both arms, one request at a time, no store call in any of them:
 *   - the header off (`admission_header = off`): the baseline;
 *   - the admission carried: the visitor sends back the cookie it got, the edge checks one HMAC;
 *   - the admission signed: the visitor does not send it back, so every request signs (ES256).
 * Latency is the median; on the wasm the engine's vCPU time from the log (on the stand-in: wall
 * time, a ceiling). On the Node arm the signature and the carried check are also timed in-process.
 * The bytes: the header the origin receives and the cookie the visitor carries.
 */
import { parseAdmissionKeys } from '../../src/core/admission-keys';
import { carriedAdmission, carryTag, signAdmission } from '../../src/core/admission';
import { parseConfig, parseSecrets } from '../../src/core/config';
import { readLocalConfig } from '../../src/platform/node';
import { table } from '../support/markdown-table';
import { microsPerCall, sequentialClass, type Arm, type ArmName, type Pass, type RoomHost, type RoomSpec, type SequentialResult } from './harness';
import { cookieFrom, findProjectFile, log, ms, PATH, send, type Reply } from './util';

const PER_CLASS: Readonly<Record<ArmName, number>> = { node: 200, wasm: 30 };
const CPU_REPEATS = 2_000;

const ON_ROOM: RoomSpec = {
  variant: 'admission',
  overrides: { queue_name: 'bench-admission', admit_per_period: '1000000', state_cache_seconds: '0' },
  nodeLogName: 'node waiting room, admission on (admission pass)',
  sockets: { node: 1, wasm: 1 },
};
const OFF_ROOM: RoomSpec = {
  variant: 'admission-off',
  overrides: { ...ON_ROOM.overrides, queue_name: 'bench-admission-off', admission_header: 'off' },
  nodeLogName: 'node waiting room, admission off (admission pass)',
  sockets: { node: 1, wasm: 1 },
};

const CLASSES = [
  { key: 'off', label: 'admitted visitor, admission_header = off' },
  { key: 'carried', label: 'admitted visitor, admission carried (one HMAC)' },
  { key: 'signed', label: 'admitted visitor, admission signed (ES256) on the request' },
] as const;
type ClassKey = (typeof CLASSES)[number]['key'];

type ClassResult = SequentialResult;

interface Sizes {
  readonly headerBytes: number;
  readonly cookieBytes: number;
}

/** A walk-in's cookies: its access token and, with the header on, the admission it carries. */
async function walkIn(host: RoomHost): Promise<{ access: string; carried: string | undefined }> {
  const r = await send(host.agent, 'GET', `${host.url}${PATH}`);
  const access = cookieFrom(r, host.config.cookieName);
  const carried = cookieFrom(r, `${host.config.cookieName}_adm`);
  if (r.status !== 200 || access === undefined) throw new Error(`admission pass: expected a walk-in, got ${r.status} ${r.body.slice(0, 120)}`);
  if ((host.config.admissionHeader === 'off') !== (carried === undefined)) throw new Error('admission pass: a carried admission where none was expected, or none where one was');
  return { access, carried };
}

function measure(arm: Arm, host: RoomHost, cookies: readonly string[]): Promise<ClassResult> {
  const through = (r: Reply) => r.status === 200 && r.headers['x-origin'] === 'demo';
  return sequentialClass(arm, host, cookies.map((cookie) => ({ cookie })), through, 'admission pass, an admitted visitor');
}

/** The Node arm's CPU for one signature and one carried check, in-process (µs, medians of 10 batches). */
async function cpuCosts(): Promise<{ signUs: number; carriedUs: number; sizes: Sizes }> {
  const local = readLocalConfig(findProjectFile('devconfig.json'));
  const secrets = parseSecrets(local.secrets);
  const settings = parseConfig((key) => local.settings(key));
  const [key] = parseAdmissionKeys((await secrets.admissionKeys())!);
  const nowMs = Date.now();
  const now = Math.floor(nowMs / 1000);
  const grant = { via: 'queue' as const, ticket: 123_456, admittedAt: now, sessionExpires: now + 1800, binding: `123456|${now}` };
  const batch = (run: () => Promise<unknown>) => microsPerCall(CPU_REPEATS, run);
  const { token } = await signAdmission(key!, settings, grant, nowMs);
  const value = `${token}~${await carryTag(secrets.keyRing, token, grant.binding)}`;
  const signUs = await batch(() => signAdmission(key!, settings, grant, nowMs));
  const carriedUs = await batch(async () => {
    if ((await carriedAdmission(secrets.keyRing, settings, value, grant, nowMs)) !== token) throw new Error('admission pass: a carried admission was refused in-process');
  });
  const cookieLine = `${settings.cookieName}_adm=${value}; Max-Age=120; Path=/; HttpOnly; Secure; SameSite=Lax`;
  return { signUs, carriedUs, sizes: { headerBytes: `${settings.admissionHeader}: ${token}\r\n`.length, cookieBytes: cookieLine.length } };
}

export function admissionPass(): Pass {
  const results: Partial<Record<ArmName, Record<ClassKey, ClassResult>>> = {};
  let cpu: Awaited<ReturnType<typeof cpuCosts>> | undefined;
  return {
    name: 'admission',
    async prepare(arm: Arm) {
      await Promise.all([arm.host(ON_ROOM), arm.host(OFF_ROOM)]);
    },
    async run(arm: Arm) {
      const n = PER_CLASS[arm.name];
      log(`${arm.name}: the signed admission's cost per admitted request (${n} per class, one at a time)`);
      const [on, off] = await Promise.all([arm.host(ON_ROOM), arm.host(OFF_ROOM)]);
      const offVisitors: string[] = [];
      const onVisitors: { access: string; carried: string | undefined }[] = [];
      for (let i = 0; i < n; i++) offVisitors.push((await walkIn(off)).access);
      for (let i = 0; i < n; i++) onVisitors.push(await walkIn(on));
      const byClass: Partial<Record<ClassKey, ClassResult>> = {};
      byClass.off = await measure(arm, off, offVisitors);
      byClass.carried = await measure(arm, on, onVisitors.map((v) => `${v.access}; ${v.carried ?? ''}`));
      byClass.signed = await measure(arm, on, onVisitors.map((v) => v.access));
      results[arm.name] = byClass as Record<ClassKey, ClassResult>;
      if (arm.name === 'node') cpu = await cpuCosts();
    },
    report(wasm) {
      if (results.node === undefined) throw new Error('admission pass: the node arm did not run');
      const failures: string[] = [];
      const rows = CLASSES.map((c) => {
        const cells: string[] = [c.label];
        for (const armName of ['node', 'wasm'] as const) {
          const r = results[armName]?.[c.key];
          if (r === undefined) {
            cells.push(...(armName === 'wasm' ? ['—', '—', '—', '—'] : ['—', '—', '—']));
            continue;
          }
          if (r.counts.http > 0) failures.push(`admission, ${armName}, ${c.label}: ${r.counts.http} store calls, none expected`);
          const base = results[armName]!.off;
          cells.push(String(r.counts.http), ms(r.p50Ms), c.key === 'off' ? '—' : `${r.p50Ms - base.p50Ms >= 0 ? '+' : ''}${ms(r.p50Ms - base.p50Ms)}`);
          if (armName === 'wasm') cells.push(r.vcpuMs === undefined ? '—' : `${ms(r.vcpuMs)}${c.key === 'off' || base.vcpuMs === undefined ? '' : ` (${r.vcpuMs - base.vcpuMs >= 0 ? '+' : ''}${ms(r.vcpuMs - base.vcpuMs)})`}`);
        }
        return cells;
      });
      const text = [
        '### What the signed admission costs an admitted request (one request at a time, no store call)',
        '',
        table(
          ['request class', 'node: store calls', 'node: p50 ms', 'node: vs off', 'wasm: store calls', 'wasm: p50 ms', 'wasm: vs off', 'wasm: vCPU ms (stand-in: wall), vs off'],
          ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          rows,
        ),
        '',
        cpu === undefined
          ? ''
          : `In-process on the Node arm (medians of 10 batches of ${CPU_REPEATS / 10}): signing an admission ${cpu.signUs.toFixed(1)} µs (ES256), ` +
            `checking a carried one again ${cpu.carriedUs.toFixed(1)} µs (a long-lived host remembers a cookie whose HMAC held; the first check is one HMAC-SHA-256 and a base64url decode). Bytes: the header the origin ` +
            `receives ${cpu.sizes.headerBytes} (name, token, CRLF; all five claims), the Set-Cookie that carries it ${cpu.sizes.cookieBytes} ` +
            '(sent once per half lifetime; the visitor sends the cookie back on every request).' +
            (wasm.kind === 'ran' ? '' : ' The wasm columns are empty: the wasm arm did not run.'),
        '',
      ].join('\n');
      return { text, failures, billed: [] };
    },
  };
}
