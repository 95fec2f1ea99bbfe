/**
 * `npm run redis:bridge`: serves the Upstash REST API over a local Redis, so the Node host and
 * `fastly compute serve` can use local state with the same client code as production.
 *
 * Environment: REDIS_URL (default redis://127.0.0.1:6379), WR_BRIDGE_PORT (default 8079, 0 picks a
 * free one; BRIDGE_PORT, its older name, is read too), BRIDGE_HOST (default 127.0.0.1),
 * UPSTASH_TOKEN (default: `dev_secrets.upstash_token` from devconfig.json at the project root, else
 * a fixed development token). A port that is taken stops it with one line naming the port and the
 * variable that moves it, and exit status 1.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkPorts, failureLine, findProjectRoot, listenOn, readPort } from './local-ports';
import { startUpstashBridge } from './upstash-bridge';

const COMMAND = 'npm run redis:bridge';
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
const DEFAULT_HOST = '127.0.0.1';
const FALLBACK_TOKEN = 'dev-only-upstash-token';

function readToken(root: string): { token: string; source: string } {
  const fromEnv = process.env.UPSTASH_TOKEN;
  if (fromEnv) return { token: fromEnv, source: 'UPSTASH_TOKEN' };
  const path = join(root, 'devconfig.json');
  if (!existsSync(path)) {
    return { token: FALLBACK_TOKEN, source: `the built-in development token (no UPSTASH_TOKEN, no ${path})` };
  }
  let parsed: { dev_secrets?: { upstash_token?: unknown } };
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8')) as typeof parsed;
  } catch (error) {
    throw new Error(`${path} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  const token = parsed.dev_secrets?.upstash_token;
  if (typeof token === 'string' && token !== '') return { token, source: `${path} (dev_secrets.upstash_token)` };
  return { token: FALLBACK_TOKEN, source: `the built-in development token (${path} has no dev_secrets.upstash_token)` };
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL || DEFAULT_REDIS_URL;
  const host = process.env.BRIDGE_HOST || DEFAULT_HOST;
  const chosen = { ...readPort(COMMAND, 'bridge'), host };
  // Before Redis is asked for: a taken port is the answer, whether or not Redis is up.
  await checkPorts(COMMAND, [chosen]);
  const { token, source } = readToken(findProjectRoot());

  const bridge = await listenOn(COMMAND, chosen, (port) => startUpstashBridge({ redisUrl, token, port, host }));
  console.log(`Upstash REST bridge for ${redisUrl}`);
  console.log(`  url:   ${bridge.url}`);
  console.log(`  token: ${token}  (from ${source})`);

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    // A second Ctrl-C means "now", even if Redis or a client is slow to let go.
    if (stopping) process.exit(1);
    stopping = true;
    console.log(`${signal}: closing the bridge`);
    bridge.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(failureLine(COMMAND, error));
  process.exit(1);
});
