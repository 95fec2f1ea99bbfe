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

/** The commands Redis ran while `run` ran. Warm the script cache first, or a NOSCRIPT miss counts too. */
export async function billedCommands(direct: IORedis, run: () => Promise<unknown>): Promise<number> {
  const before = commandCalls(await direct.info('commandstats'));
  await run();
  return commandCalls(await direct.info('commandstats')) - before;
}
