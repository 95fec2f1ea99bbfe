/**
 * A broken configuration must neither open the gates nor take the service down: the service keeps
 * running on the last settings that built a working service. Only settings are remembered, never
 * secrets (those live in the Secret Store and nowhere else).
 */
import { CONFIG_KEYS, ConfigError, type ConfigProblem, type SettingSource } from './config';
import { createService, type Service, type ServiceDeps } from './service';

/** Where the last valid settings are kept: the POP's cache on Fastly, memory on the Node host. */
export interface SettingsMemory {
  recall(): Promise<string | undefined>;
  remember(snapshot: string): Promise<void>;
  /**
   * Whether `snapshot` is what is remembered, when the memory can tell more cheaply than recall()
   * (on Fastly: the entry's metadata, without reading its body). Asked on every request whose
   * settings are valid, so it is the hot path of this module.
   */
  holds?(snapshot: string): Promise<boolean>;
}

/** The settings as one JSON object of the keys that are set (stable key order, comparable). */
export function snapshotSettings(source: SettingSource): string {
  const values: Record<string, string> = {};
  for (const key of CONFIG_KEYS) {
    const value = source(key);
    if (value !== undefined) values[key] = value;
  }
  return JSON.stringify(values);
}

export function sourceFromSnapshot(snapshot: string): SettingSource {
  const values = JSON.parse(snapshot) as Record<string, unknown>;
  return (key) => {
    const value = values[key];
    return typeof value === 'string' ? value : undefined;
  };
}

export interface BuiltService {
  readonly service: Service;
  /** Set when the current settings are broken and the last valid ones are in use: what is wrong. */
  readonly refused: ConfigError | undefined;
}

/**
 * Builds the service from the current settings and remembers them; when they are refused, builds
 * it from the last valid ones and says what was refused. `settingProblems` are what was found
 * wrong before parsing (a settings document's broken JSON or unknown names): they refuse the
 * settings like a bad value does, named together with any bad value. Throws the ConfigError when
 * there is no valid configuration to fall back on (or the secrets themselves are broken).
 * `later`: where valid settings are remembered when the host can do it off the request's path
 * (Fastly: after the response); without it, before this returns.
 */
export async function buildWithLastValid(
  settings: SettingSource,
  secrets: SettingSource,
  deps: ServiceDeps,
  memory: SettingsMemory,
  settingProblems: readonly ConfigProblem[] = [],
  later?: (work: () => Promise<void>) => void,
): Promise<BuiltService> {
  let refused: ConfigError;
  try {
    const service = createService(settings, secrets, deps);
    if (settingProblems.length > 0) throw new ConfigError(settingProblems);
    const keep = async (): Promise<void> => {
      const snapshot = snapshotSettings(settings);
      const held = memory.holds !== undefined ? await memory.holds(snapshot).catch(() => false) : (await memory.recall().catch(() => undefined)) === snapshot;
      if (!held) await memory.remember(snapshot).catch(() => undefined);
    };
    // The request itself does not need the settings remembered: a host may do it off its path.
    if (later !== undefined) later(() => keep().catch(() => undefined));
    else await keep();
    return { service, refused: undefined };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    refused = error.problems === settingProblems ? error : new ConfigError([...settingProblems, ...error.problems]);
  }
  const last = await memory.recall().catch(() => undefined);
  if (last === undefined) throw refused;
  try {
    return { service: createService(sourceFromSnapshot(last), secrets, deps), refused };
  } catch {
    throw refused;
  }
}
