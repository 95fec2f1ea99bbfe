/**
 * `npm run smoke -- <site URL>`: checks a deployed waiting room from outside, as a visitor, an
 * operator and the origin's tooling would meet it, and exits 1 when anything is wrong.
 *
 *   1. health        GET <prefix>health answers {"ok": true} (a refused configuration is a 503 naming it)
 *   2. visitor       GET <path> as a browser: the holding page (or the origin, when there is room) and a queue cookie
 *   3. status        GET <prefix>status with that cookie: JSON with the visitor's state
 *   4. admin         GET <prefix>admin without and with wrong credentials: 401 asking for Basic Auth;
 *                    with WR_SMOKE_ADMIN_PASSWORD: 200, the console
 *   5. jwks          GET <prefix>.well-known/jwks.json: the admission's public keys (a warning when unset)
 *   6. admitted      with WR_SMOKE_API_TOKEN: a one-use VIP code (expiring in 5 minutes) lets a new
 *                    visitor in without taking anyone's place, and its next request reaches the origin
 *
 * Options: `--path /shop/` (a queued path; default `/`), `--prefix /__wr/`. Environment:
 * WR_SMOKE_ADMIN_USER (default admin), WR_SMOKE_ADMIN_PASSWORD, WR_SMOKE_API_TOKEN. The wrong
 * password of check 4 is one failed sign-in from this address (see auth_failure_limit).
 */
import { pathToFileURL } from 'node:url';

export interface SmokeOptions {
  readonly base: string;
  readonly path: string;
  readonly prefix: string;
  readonly adminUser: string;
  readonly adminPassword?: string | undefined;
  readonly apiToken?: string | undefined;
  readonly timeoutMs: number;
}

export interface SmokeResult {
  readonly name: string;
  readonly outcome: 'pass' | 'fail' | 'warn' | 'skip';
  readonly detail: string;
}

/** The holding page's own script: how a page of ours is told from the origin's. */
const HOLDING_MARK = /assets\/holding\.js/;

/** Keeps the cookies a response sets in `jar` (a cleared one leaves it), as a browser would. */
function takeCookies(response: Response, jar: Map<string, string>): void {
  for (const line of response.headers.getSetCookie()) {
    const pair = line.split(';', 1)[0] ?? '';
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const value = pair.slice(eq + 1);
    // A cleared cookie (empty, or expired at once) leaves the jar.
    if (value === '' || /max-age=0/i.test(line)) jar.delete(pair.slice(0, eq));
    else jar.set(pair.slice(0, eq), value);
  }
}

const jarText = (jar: Map<string, string>) => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');

async function bodyText(response: Response): Promise<string> {
  try {
    return await response.text();
  } catch {
    return '';
  }
}

/** Runs every check; never throws (a check that cannot run is a failure with its reason). */
export async function runSmoke(options: SmokeOptions): Promise<SmokeResult[]> {
  const results: SmokeResult[] = [];
  const url = (path: string) => new URL(path, options.base).toString();
  const get = (path: string, headers: Record<string, string> = {}, init: RequestInit = {}) =>
    fetch(url(path), { redirect: 'manual', ...init, headers: { 'user-agent': 'waiting-room-smoke/1', ...headers }, signal: AbortSignal.timeout(options.timeoutMs) });
  const check = async (name: string, run: () => Promise<Omit<SmokeResult, 'name'>>) => {
    try {
      results.push({ name, ...(await run()) });
    } catch (error) {
      results.push({ name, outcome: 'fail', detail: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    }
  };
  const p = options.prefix;

  await check('health', async () => {
    const response = await get(`${p}health`);
    const text = await bodyText(response);
    if (response.status === 200 && /"ok":\s*true/.test(text)) return { outcome: 'pass', detail: '200 {"ok": true}' };
    return { outcome: 'fail', detail: `${response.status}: ${text.slice(0, 400)}` };
  });

  const visitor = new Map<string, string>();
  let visitorReachedOrigin = false;
  await check('visitor', async () => {
    const response = await get(options.path, { accept: 'text/html', 'accept-language': 'en' });
    takeCookies(response, visitor);
    const text = await bodyText(response);
    const ours = HOLDING_MARK.test(text);
    if (visitor.size === 0) return { outcome: 'fail', detail: `${response.status} without a queue cookie: is ${options.path} a queued path?` };
    if (ours && [200, 429, 503].includes(response.status)) return { outcome: 'pass', detail: `${response.status}, the holding page, cookie ${[...visitor.keys()].join(', ')}` };
    if (!ours && response.status < 500) {
      visitorReachedOrigin = true;
      return { outcome: 'pass', detail: `${response.status} from the origin (there was room: walked in), cookie ${[...visitor.keys()].join(', ')}` };
    }
    return { outcome: 'fail', detail: `${response.status}${ours ? ' (our page)' : ''}: ${text.slice(0, 300)}` };
  });

  await check('status', async () => {
    const response = await get(`${p}status`, { accept: 'application/json', cookie: jarText(visitor) });
    const text = await bodyText(response);
    let state: unknown;
    try {
      state = (JSON.parse(text) as { state?: unknown }).state;
    } catch {
      return { outcome: 'fail', detail: `${response.status}, not JSON: ${text.slice(0, 200)}` };
    }
    if (response.status !== 200 || typeof state !== 'string') return { outcome: 'fail', detail: `${response.status}: ${text.slice(0, 200)}` };
    return { outcome: 'pass', detail: `200, state ${state}` };
  });

  await check('admin', async () => {
    const bare = await get(`${p}admin`);
    await bodyText(bare);
    if (bare.status !== 401 || !/^Basic /i.test(bare.headers.get('www-authenticate') ?? '')) {
      return { outcome: 'fail', detail: `without credentials: ${bare.status}, expected 401 with WWW-Authenticate: Basic` };
    }
    const wrong = await get(`${p}admin`, { authorization: `Basic ${btoa(`${options.adminUser}:not-the-password-${Date.now()}`)}` });
    await bodyText(wrong);
    if (wrong.status !== 401 && wrong.status !== 429) return { outcome: 'fail', detail: `with a wrong password: ${wrong.status}, expected 401` };
    if (options.adminPassword === undefined) return { outcome: 'pass', detail: 'refuses no and wrong credentials (set WR_SMOKE_ADMIN_PASSWORD to sign in too)' };
    const right = await get(`${p}admin`, { authorization: `Basic ${btoa(`${options.adminUser}:${options.adminPassword}`)}` });
    const text = await bodyText(right);
    if (right.status === 200 && /<html/i.test(text)) return { outcome: 'pass', detail: 'refuses no and wrong credentials; signs in with the password' };
    return { outcome: 'fail', detail: `with the password: ${right.status}: ${text.slice(0, 200)}` };
  });

  await check('jwks', async () => {
    const response = await get(`${p}.well-known/jwks.json`);
    const text = await bodyText(response);
    if (response.status === 200) {
      const keys = (JSON.parse(text) as { keys?: unknown[] }).keys ?? [];
      return keys.length > 0 ? { outcome: 'pass', detail: `${keys.length} key(s)` } : { outcome: 'fail', detail: '200 with no keys' };
    }
    if (response.status === 503) return { outcome: 'warn', detail: 'admission_keys is not set: the origin gets no signed admission' };
    return { outcome: 'fail', detail: `${response.status}: ${text.slice(0, 200)}` };
  });

  await check('admitted', async () => {
    if (options.apiToken === undefined) {
      if (visitorReachedOrigin) return { outcome: 'pass', detail: 'the visitor walked in (check 2)' };
      return { outcome: 'skip', detail: 'set WR_SMOKE_API_TOKEN to let a visitor in with a one-use VIP code' };
    }
    const made = await get(`${p}api/vip`, { authorization: `Bearer ${options.apiToken}`, 'content-type': 'application/json' }, { method: 'POST', body: JSON.stringify({ count: 1, uses: 1, expires_in_seconds: 300 }) });
    const madeText = await bodyText(made);
    if (made.status !== 200) return { outcome: 'fail', detail: `POST ${p}api/vip: ${made.status}: ${madeText.slice(0, 200)}` };
    const code = (JSON.parse(madeText) as { codes?: { code?: string }[] }).codes?.[0]?.code;
    if (code === undefined) return { outcome: 'fail', detail: `POST ${p}api/vip gave no code: ${madeText.slice(0, 200)}` };
    const jar = new Map<string, string>();
    const separator = options.path.includes('?') ? '&' : '?';
    const spent = await get(`${options.path}${separator}wr_vip=${code}`, { accept: 'text/html' });
    takeCookies(spent, jar);
    await bodyText(spent);
    const location = spent.headers.get('location');
    if (spent.status < 300 || spent.status > 399 || location === null) return { outcome: 'fail', detail: `the VIP link answered ${spent.status}, expected a redirect with an access cookie` };
    if (location.includes('wr_vip')) return { outcome: 'fail', detail: `the redirect keeps the code: ${location}` };
    const inside = await get(new URL(location, url(options.path)).pathname, { accept: 'text/html', cookie: jarText(jar) });
    takeCookies(inside, jar);
    const text = await bodyText(inside);
    if (HOLDING_MARK.test(text)) return { outcome: 'fail', detail: `${inside.status}: still the holding page after the VIP code` };
    if (inside.status >= 500) return { outcome: 'fail', detail: `${inside.status} from the origin: ${text.slice(0, 200)}` };
    const status = await get(`${p}status`, { accept: 'application/json', cookie: jarText(jar) });
    const state = (JSON.parse(await bodyText(status)) as { state?: string }).state;
    if (state !== 'admitted') return { outcome: 'fail', detail: `the origin answered ${inside.status} but the status says ${state}` };
    return { outcome: 'pass', detail: `a one-use VIP code let a visitor in; the origin answered ${inside.status}` };
  });

  return results;
}

const MARKS: Record<SmokeResult['outcome'], string> = { pass: 'ok  ', fail: 'FAIL', warn: 'warn', skip: 'skip' };

/** The lines printed for the results, and the exit status: 1 when any check failed. */
export function report(results: readonly SmokeResult[]): { lines: string[]; status: number } {
  const lines = results.map((r) => `${MARKS[r.outcome]} ${r.name.padEnd(9)} ${r.detail}`);
  const failed = results.filter((r) => r.outcome === 'fail').length;
  lines.push(`smoke check: ${results.filter((r) => r.outcome === 'pass').length} passed, ${failed} failed`);
  return { lines, status: failed > 0 ? 1 : 0 };
}

/** Reads the command line; an error message for a bad one. */
export function parseArguments(argv: readonly string[], env: NodeJS.ProcessEnv): SmokeOptions | string {
  let base: string | undefined;
  let path = '/';
  let prefix = '/__wr/';
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--path' || arg === '--prefix') {
      const value = argv[++i];
      if (value === undefined || !value.startsWith('/')) return `${arg} needs a path starting with /`;
      if (arg === '--path') path = value;
      else prefix = value.endsWith('/') ? value : `${value}/`;
    } else if (base === undefined && !arg.startsWith('--')) {
      base = arg;
    } else {
      return `unknown argument ${arg}`;
    }
  }
  if (base === undefined) return 'usage: npm run smoke -- <site URL, e.g. https://shop.example> [--path /queued/path] [--prefix /__wr/]';
  try {
    const parsed = new URL(base);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return `${base} is not an http(s) URL`;
  } catch {
    return `${base} is not a URL`;
  }
  const secret = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  return {
    base,
    path,
    prefix,
    adminUser: env['WR_SMOKE_ADMIN_USER'] || 'admin',
    adminPassword: secret('WR_SMOKE_ADMIN_PASSWORD'),
    apiToken: secret('WR_SMOKE_API_TOKEN'),
    timeoutMs: 10_000,
  };
}

async function main(): Promise<void> {
  const options = parseArguments(process.argv.slice(2), process.env);
  if (typeof options === 'string') {
    console.error(options);
    process.exit(2);
  }
  console.log(`smoke check of ${options.base} (queued path ${options.path}, prefix ${options.prefix})`);
  const { lines, status } = report(await runSmoke(options));
  for (const line of lines) console.log(line);
  process.exit(status);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
