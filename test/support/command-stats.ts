/**
 * Billed commands, as Upstash counts them: every command Redis ran, the script call itself plus
 * every `redis.call` inside it, read from INFO commandstats before and after. Only for a redis-server
 * nobody else uses meanwhile (tests start their own).
 */
import type IORedis from 'ioredis';

/** The calls of every command in an INFO commandstats reply, but INFO itself (the measurement's own). */
export function commandCalls(commandstats: string): number {
  let total = 0;
  for (const match of commandstats.matchAll(/cmdstat_([a-z_|-]+):calls=(\d+)/g)) {
    if (match[1] !== 'info') total += Number(match[2]);
  }
  return total;
}

/** Store round trips as Redis sees them: the script commands. */
export const SCRIPT_COMMANDS: ReadonlySet<string> = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro']);

/**
 * From one INFO commandstats reply: the script calls, and calls + rejected_calls of every command
 * not in `excluded` (what Upstash would bill, less a harness's own commands). Redis 7 names
 * subcommands `script|load`, `client|setinfo`: they count under their command.
 */
export function parseCommandstats(info: string, excluded: ReadonlySet<string>): { scripts: number; billed: number } {
  let scripts = 0;
  let billed = 0;
  for (const line of info.split(/\r?\n/)) {
    const match = /^cmdstat_([^:|]+)(?:\|[^:]*)?:(.*)$/.exec(line);
    if (match === null) continue;
    const command = match[1] ?? '';
    let calls = 0;
    for (const field of (match[2] ?? '').split(',')) {
      const [key, value] = field.split('=');
      if (key === 'calls' || key === 'rejected_calls') calls += Number(value ?? 0);
    }
    if (SCRIPT_COMMANDS.has(command)) scripts += calls;
    if (!excluded.has(command)) billed += calls;
  }
  return { scripts, billed };
}

/** The commands Redis ran while `run` ran. Warm the script cache first, or a NOSCRIPT miss counts too. */
export async function billedCommands(direct: IORedis, run: () => Promise<unknown>): Promise<number> {
  const before = commandCalls(await direct.info('commandstats'));
  await run();
  return commandCalls(await direct.info('commandstats')) - before;
}
