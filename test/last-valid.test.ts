/** A broken configuration is refused with every problem named, and the service keeps its last valid one. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../src/core/config';
import { buildWithLastValid, snapshotSettings, sourceFromSnapshot, type SettingsMemory } from '../src/core/last-valid';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';

class Memory implements SettingsMemory {
  snapshot: string | undefined;
  writes = 0;
  async recall() {
    return this.snapshot;
  }
  async remember(snapshot: string) {
    this.writes++;
    this.snapshot = snapshot;
  }
}

const clock = new ManualClock();
const deps = { store: new MemoryQueueStore(), origin: new RecordingOrigin(), logger: new MemoryLogger(), clock, cache: new MemoryStateCache(clock), authLimiter: new MemoryFailureLimiter(clock), ticketLimiter: new MemoryFailureLimiter(clock) };
const CLIENT = { address: '203.0.113.4', pop: 'TST' };

describe('the last valid configuration', () => {
  it('is remembered when the settings are good, once per change', async () => {
    const memory = new Memory();
    await buildWithLastValid(source({ ...BASE_SETTINGS, page_title: 'Sale' }), source(BASE_SECRETS), deps, memory);
    await buildWithLastValid(source({ ...BASE_SETTINGS, page_title: 'Sale' }), source(BASE_SECRETS), deps, memory);
    expect(memory.writes).toBe(1);
    expect(sourceFromSnapshot(memory.snapshot!)('page_title')).toBe('Sale');
    // Secrets are never part of it.
    expect(memory.snapshot).not.toContain(BASE_SECRETS['admin_password']);
  });

  it('keeps the service running on it when broken settings are published, naming every problem', async () => {
    const memory = new Memory();
    await buildWithLastValid(source({ ...BASE_SETTINGS, page_title: 'Last good' }), source(BASE_SECRETS), deps, memory);
    const broken = source({ ...BASE_SETTINGS, page_title: 'New', refresh_seconds: 'soon', queues: '[{"name": "Bad"}]' });
    const built = await buildWithLastValid(broken, source(BASE_SECRETS), deps, memory);
    expect(built.refused?.problems.map((p) => p.key)).toEqual(['queues[0].name']);
    // Still queueing, with the last good page: neither open gates nor an error.
    const response = await built.service.handler(new Request('https://shop.example/'), CLIENT);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('· Last good</title>');
    expect(memory.snapshot).toBe(snapshotSettings(source({ ...BASE_SETTINGS, page_title: 'Last good' })));
  });

  it('refuses to start on broken settings when there is nothing to fall back on', async () => {
    const attempt = buildWithLastValid(source({ ...BASE_SETTINGS, hold_status: '302' }), source(BASE_SECRETS), deps, new Memory());
    await expect(attempt).rejects.toBeInstanceOf(ConfigError);
    await expect(attempt).rejects.toThrow(/hold_status/);
  });

  it('does not hide broken secrets behind old settings', async () => {
    const memory = new Memory();
    await buildWithLastValid(source(BASE_SETTINGS), source(BASE_SECRETS), deps, memory);
    await expect(buildWithLastValid(source({ ...BASE_SETTINGS, hold_status: '302' }), source({ signing_keys: 'k1:short' }), deps, memory)).rejects.toThrow(/signing_keys/);
  });
});
