/**
 * The challenge hook (issue 14, item 3): the edge's siteverify call against a local fake provider
 * over real HTTP (success, failure, a stale token, timeout, the provider down, our setup refused),
 * and the request path around it: no ticket without a token the provider accepts, the provider
 * down under each policy, the shadow queue for refused tokens, the console's counts, and no store
 * call for any refusal. In a real browser: test/browser.test.ts; on both hosts: the e2e suites.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { challengeSources, verifyChallenge, type ChallengeSettings } from '../src/core/challenge';
import { parseConfig } from '../src/core/config';
import { holdingCsp } from '../src/core/holding';
import type { SiteVerifier } from '../src/core/ports';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { fetchSiteVerifier } from '../src/platform/node';
import { MemoryQueueStore } from '../src/store/memory-store';
import { fakeProviderSettings, startFakeProvider, type FakeProvider } from './support/fake-siteverify';
import { ADMIN_PASSWORD, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, source, testHandler } from './support/fixtures';

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);
const CLIENT = '198.51.100.20';

let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider();
});
afterAll(async () => {
  await provider.close();
});
afterEach(() => {
  provider.mode = 'ok';
  provider.hostname = undefined;
  provider.calls.length = 0;
});

function settingsOf(extra: Record<string, string> = {}): ChallengeSettings {
  return parseConfig(source({ ...BASE_SETTINGS, ...fakeProviderSettings(provider, extra) }));
}

describe('siteverify', () => {
  it('posts the secret, the token and the client address as a form, and a token passes once', async () => {
    const settings = settingsOf();
    expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', 'pass-one', CLIENT, 'shop.example')).toEqual({ kind: 'passed' });
    expect(provider.calls).toEqual([{ fields: { secret: 'secret', response: 'pass-one', remoteip: CLIENT }, contentType: 'application/x-www-form-urlencoded' }]);
    // Single use, as the providers' tokens are: the second time it is stale, not a bot.
    expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', 'pass-one', CLIENT, 'shop.example')).toEqual({ kind: 'stale', reason: 'challenge_stale: timeout-or-duplicate' });
    expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', 'expired-1', CLIENT, 'shop.example')).toMatchObject({ kind: 'stale' });
  });

  it('sends hCaptcha the site key the token must be made for', async () => {
    const settings = settingsOf({ challenge_provider: 'hcaptcha' });
    expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', 'pass-h', undefined, 'shop.example')).toEqual({ kind: 'passed' });
    expect(provider.calls[0]!.fields).toEqual({ secret: 'secret', response: 'pass-h', sitekey: '1x00000000000000000000AA' });
  });

  it('fails a token the provider refuses, and one that could not be a token without asking', async () => {
    const settings = settingsOf();
    expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', 'forged', CLIENT, 'shop.example')).toEqual({ kind: 'failed', reason: 'challenge_failed: invalid-input-response' });
    expect(provider.calls).toHaveLength(1);
    for (const bad of ['', 'a b', 'x;y', 'é', 'x'.repeat(4097)]) {
      expect(await verifyChallenge(fetchSiteVerifier, settings, 'secret', bad, CLIENT, 'shop.example')).toEqual({ kind: 'failed', reason: 'challenge_malformed' });
    }
    expect(provider.calls).toHaveLength(1);
  });

  it.each([
    ['down', /^challenge_down: the provider answered 503$/],
    ['garbage', /^challenge_down: the provider answered something that is not JSON$/],
    ['internal', /^challenge_down: the provider refused our setup \(internal-error\)$/],
  ] as const)('counts a provider in mode %s as down', async (mode, reason) => {
    provider.mode = mode;
    const verdict = await verifyChallenge(fetchSiteVerifier, settingsOf(), 'secret', 'pass-x', CLIENT, 'shop.example');
    expect(verdict.kind).toBe('down');
    expect(verdict.kind !== 'passed' && verdict.reason).toMatch(reason);
  });

  // What the visitor sends decides these answers, so none of them may read as "provider down": with
  // challenge_unavailable = pass that would let the sender in unchecked (issue 31, item 5).
  it.each([
    [400, { success: false, 'error-codes': ['invalid-input-response'] }, 'failed', 'challenge_failed: the provider answered 400 (invalid-input-response)'],
    [400, { success: false, 'error-codes': ['bad-request'] }, 'failed', 'challenge_failed: the provider answered 400 (bad-request)'],
    [403, 'Forbidden', 'failed', 'challenge_failed: the provider answered 403 (no error code)'],
    [429, { success: false }, 'failed', 'challenge_failed: the provider answered 429 (no error code)'],
    [413, { success: true }, 'failed', 'challenge_failed: the provider answered 413 (no error code)'],
    [200, { success: false, 'error-codes': ['missing-input-response'] }, 'failed', 'challenge_failed: missing-input-response'],
    [200, { success: false, 'error-codes': ['invalid-input-response', 'internal-error'] }, 'failed', 'challenge_failed: invalid-input-response, internal-error'],
    [200, { success: false, 'error-codes': ['invalid-input-response', 'invalid-input-secret'] }, 'failed', 'challenge_failed: invalid-input-response, invalid-input-secret'],
    [200, { success: false, 'error-codes': ['timeout-or-duplicate', 'internal-error'] }, 'stale', 'challenge_stale: timeout-or-duplicate, internal-error'],
    [200, { success: false, 'error-codes': [...Array<string>(5).fill('internal-error'), 'invalid-input-response'] }, 'failed', `challenge_failed: ${Array<string>(5).fill('internal-error').join(', ')}`],
    [200, { success: false, 'error-codes': ['invalid-remoteip'] }, 'failed', 'challenge_failed: invalid-remoteip'],
    [200, { success: false, 'error-codes': ['not-using-dummy-passcode'] }, 'failed', 'challenge_failed: not-using-dummy-passcode'],
    // Only our own secret or site key refused, or the provider's own failure, is down, whatever the status.
    [400, { success: false, 'error-codes': ['invalid-input-secret'] }, 'down', 'challenge_down: the provider refused our setup (invalid-input-secret)'],
    [200, { success: false, 'error-codes': ['missing-input-secret'] }, 'down', 'challenge_down: the provider refused our setup (missing-input-secret)'],
    [200, { success: false, 'error-codes': ['invalid-parsed-secret'] }, 'down', 'challenge_down: the provider refused our setup (invalid-parsed-secret)'],
    [200, { success: false, 'error-codes': ['sitekey-secret-mismatch'] }, 'down', 'challenge_down: the provider refused our setup (sitekey-secret-mismatch)'],
    [500, { success: false, 'error-codes': ['invalid-input-response'] }, 'down', 'challenge_down: the provider answered 500'],
  ] as const)('answered %i %j: %s', async (status, body, kind, reason) => {
    provider.mode = 'canned';
    provider.canned = { status, body: typeof body === 'string' ? body : JSON.stringify(body) };
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), 'secret', 'pass-canned', CLIENT, 'shop.example')).toEqual({ kind, reason });
  });

  it('fails a token solved on another host: it was farmed elsewhere, not on this page', async () => {
    provider.hostname = 'farm.example';
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), 'secret', 'pass-farmed', CLIENT, 'shop.example')).toEqual({
      kind: 'failed',
      reason: 'challenge_failed: solved on another host (farm.example)',
    });
    // Host names compare as DNS does: case and a final dot do not make another host.
    provider.hostname = 'Shop.Example.';
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), 'secret', 'pass-here', CLIENT, 'shop.example')).toEqual({ kind: 'passed' });
    // A provider that names no host cannot be held to one.
    provider.hostname = '';
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), 'secret', 'pass-unnamed', CLIENT, 'shop.example')).toEqual({ kind: 'passed' });
  });

  it('does not hold a provider\'s test secret to the host: its dummy token is reported for a host of the provider\'s', async () => {
    const elsewhere: SiteVerifier = { post: async () => Response.json({ success: true, hostname: 'example.com', 'error-codes': [] }) };
    expect(await verifyChallenge(elsewhere, settingsOf(), '1x0000000000000000000000000000000AA', 'XXXX.DUMMY.TOKEN.XXXX', CLIENT, 'shop.example')).toEqual({ kind: 'passed' });
    expect(await verifyChallenge(elsewhere, settingsOf(), '0x0000000000000000000000000000000000000000', 'dummy', CLIENT, 'shop.example')).toEqual({ kind: 'passed' });
    expect(await verifyChallenge(elsewhere, settingsOf(), '0x4AAAAAAA-real-secret', 'real', CLIENT, 'shop.example')).toMatchObject({ kind: 'failed' });
  });

  it('counts our own setup refused (a wrong or missing secret) as down, never as the visitor failing', async () => {
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), 'wrong', 'pass-y', CLIENT, 'shop.example')).toEqual({
      kind: 'down',
      reason: 'challenge_down: the provider refused our setup (invalid-input-secret)',
    });
    expect(await verifyChallenge(fetchSiteVerifier, settingsOf(), undefined, 'pass-y', CLIENT, 'shop.example')).toEqual({
      kind: 'down',
      reason: 'challenge_down: the secret challenge_secret is not set',
    });
  });

  it('stops waiting after challenge_timeout_ms', async () => {
    provider.mode = 'slow';
    // Longer than this test may run, so any verdict at all came from the timeout, not from the
    // provider, without measuring how long it took (a busy machine is slow, not wrong).
    provider.slowMs = 10 * 60_000;
    const verdict = await verifyChallenge(fetchSiteVerifier, settingsOf({ challenge_timeout_ms: '200' }), 'secret', 'pass-slow', CLIENT, 'shop.example');
    expect(verdict).toMatchObject({ kind: 'down' });
  });

  it('stops waiting even when the platform cannot abort the request (as on Fastly)', async () => {
    const hanging: SiteVerifier = { post: () => new Promise<Response>(() => undefined) };
    expect(await verifyChallenge(hanging, settingsOf({ challenge_timeout_ms: '100' }), 'secret', 'pass-z', CLIENT, 'shop.example')).toEqual({
      kind: 'down',
      reason: 'challenge_down: no answer within 100 ms',
    });
  });

  it('counts a provider that cannot be reached as down', async () => {
    const gone = await startFakeProvider();
    await gone.close();
    const verdict = await verifyChallenge(fetchSiteVerifier, settingsOf({ challenge_verify_url: gone.verifyUrl }), 'secret', 'pass-gone', CLIENT, 'shop.example');
    expect(verdict).toMatchObject({ kind: 'down', reason: expect.stringMatching(/^challenge_down: /) });
  });
});

describe('settings', () => {
  it('fills in a provider\'s own URLs and widget, and the page may load from its origins only', () => {
    const turnstile = parseConfig(source({ ...BASE_SETTINGS, challenge_provider: 'turnstile', challenge_site_key: '0x4AAAAAAABkMYinukE8nzY' }));
    expect(turnstile).toMatchObject({
      challengeVerifyUrl: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
      challengeScriptUrl: 'https://challenges.cloudflare.com/turnstile/v0/api.js',
      challengeWidgetClass: 'cf-turnstile',
      challengeUnavailable: 'hold',
      challengeTimeoutMs: 3000,
    });
    expect(challengeSources(turnstile)).toEqual(['https://challenges.cloudflare.com']);
    const hcaptcha = parseConfig(source({ ...BASE_SETTINGS, challenge_provider: 'hcaptcha', challenge_site_key: '10000000-ffff-ffff-ffff-000000000001' }));
    expect(hcaptcha).toMatchObject({ challengeVerifyUrl: 'https://api.hcaptcha.com/siteverify', challengeWidgetClass: 'h-captcha' });
    expect(challengeSources(hcaptcha)).toEqual(['https://js.hcaptcha.com', 'https://hcaptcha.com', 'https://*.hcaptcha.com']);
    expect(holdingCsp('n0', '/logo.svg', challengeSources(hcaptcha))).toContain("frame-src https://js.hcaptcha.com https://hcaptcha.com https://*.hcaptcha.com;");
    expect(holdingCsp('n0', '/logo.svg')).not.toContain('frame-src');
    expect(challengeSources(parseConfig(source(BASE_SETTINGS)))).toEqual([]);
  });

  it.each([
    [{ challenge_provider: 'recaptcha' }, 'challenge_provider'],
    [{ challenge_provider: 'turnstile' }, 'challenge_site_key'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'key"><script>' }, 'challenge_site_key'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'k', challenge_verify_url: 'http://provider.example/siteverify' }, 'challenge_verify_url'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'k', challenge_script_url: 'javascript:alert(1)' }, 'challenge_script_url'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'k', challenge_widget_class: 'a b' }, 'challenge_widget_class'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'k', challenge_timeout_ms: '20000' }, 'challenge_timeout_ms'],
    [{ challenge_provider: 'turnstile', challenge_site_key: 'k', challenge_unavailable: 'maybe' }, 'challenge_unavailable'],
  ])('refuses %j, naming %s', (settings, key) => {
    expect(() => parseConfig(source({ ...BASE_SETTINGS, ...settings }))).toThrow(new RegExp(key));
  });

  it('refuses the secret among the settings', async () => {
    const { unknownSettingProblems } = await import('../src/core/config');
    expect(unknownSettingProblems(['challenge_secret'])).toEqual([
      { key: 'Config Store item challenge_secret', message: 'is a secret: it belongs in the Secret Store (wr_secrets), never with the settings' },
    ]);
  });
});

describe('the hook in the request path', () => {
  function rig(extra: Record<string, string> = {}, verifier: SiteVerifier | null = fetchSiteVerifier) {
    const clock = new ManualClock(NOW);
    const store = new FaultyStore(new MemoryQueueStore());
    const logger = new MemoryLogger();
    const handler = testHandler(fakeProviderSettings(provider, extra), { store, logger, clock, ticketLimiter: new MemoryFailureLimiter(clock), siteVerifier: verifier ?? undefined });
    const get = (cookies: Record<string, string> = {}, headers: Record<string, string> = {}, address = CLIENT) =>
      handler(
        new Request('https://shop.example/tickets', {
          headers: { cookie: Object.entries(cookies).map(([k, v]) => `${k}=${v}`).join('; '), ...headers },
        }),
        { address, pop: 'TEST' },
      );
    const live = async (): Promise<{ figures: Record<string, string>; state: { tickets_refused_last_minute_here: Record<string, number> } }> =>
      (await handler(new Request('https://shop.example/__wr/admin/live', { headers: { authorization: `Basic ${btoa(`admin:${ADMIN_PASSWORD}`)}` } }), { address: '192.0.2.1', pop: 'TEST' })).json() as never;
    return { clock, store, logger, get, live };
  }
  const liveData = async (response: Response): Promise<{ hook?: Record<string, string> }> =>
    JSON.parse(/<script type="application\/json" id="wr-live">([^<]*)<\/script>/.exec(await response.text())![1]!.replace(/\\u003c/g, '<'));

  it('shows the widget to a new visitor, asks nobody, then gives a ticket for a token the provider accepts and clears it', async () => {
    const r = rig();
    const first = await r.get();
    expect(first.status).toBe(200);
    expect(cookieFrom(first)).toBeUndefined();
    expect(r.store.calls).toBe(0);
    expect(provider.calls).toHaveLength(0);
    expect(r.logger.last).toMatchObject({ decision: 'challenge', reason: 'challenge_missing' });
    expect(first.headers.get('content-security-policy')).toContain(`script-src 'self' ${provider.url};`);
    expect(first.headers.get('content-security-policy')).toContain(`frame-src ${provider.url};`);
    const html = await first.clone().text();
    expect(html).toContain('checks that you are a person');
    expect((await liveData(first)).hook).toEqual({
      provider: 'turnstile',
      siteKey: '1x00000000000000000000AA',
      script: provider.scriptUrl,
      widget: 'cf-turnstile',
      cookie: 'waiting_room_cha',
      prompt: 'Please complete the check below to get your place in line.',
    });
    const second = await r.get({ waiting_room_cha: 'pass-visitor' });
    expect(payloadOf(cookieFrom(second)!)).toMatchObject({ k: 'w', t: 1 });
    expect(second.headers.getSetCookie()).toContain('waiting_room_cha=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax');
    expect(provider.calls.map((c) => c.fields['response'])).toEqual(['pass-visitor']);
    expect(r.store.calls).toBe(1);
    // Holding a ticket, the visitor is not checked again, whatever it sends.
    await r.get({ waiting_room: cookieFrom(second)!, waiting_room_cha: 'pass-visitor' });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', ticket: 1 });
    expect(provider.calls).toHaveLength(1);
    // Programs get the widget's particulars as JSON.
    expect(await (await r.get({}, { accept: 'application/json' })).json()).toMatchObject({
      status: 'challenge',
      provider: 'turnstile',
      site_key: '1x00000000000000000000AA',
      cookie: 'waiting_room_cha',
    });
  });

  it('gives no ticket for a refused, forged or replayed token, and asks nothing of the store for it', async () => {
    const r = rig();
    const attempts: [Record<string, string>, string][] = [
      [{}, 'challenge_missing'],
      [{ waiting_room_cha: 'forged' }, 'challenge_failed: invalid-input-response'],
      [{ waiting_room_cha: 'bad%20token' }, 'challenge_malformed'],
      [{ waiting_room_cha: 'expired-abc' }, 'challenge_stale: timeout-or-duplicate'],
    ];
    for (const [cookies, reason] of attempts) {
      const response = await r.get(cookies);
      expect(cookieFrom(response), JSON.stringify(cookies)).toBeUndefined();
      expect(r.logger.last).toMatchObject({ decision: 'challenge', reason });
    }
    expect(r.store.calls).toBe(0);
    // A token that got one ticket gets no second.
    expect(payloadOf(cookieFrom(await r.get({ waiting_room_cha: 'pass-once' }))!)['t']).toBe(1);
    expect(cookieFrom(await r.get({ waiting_room_cha: 'pass-once' }))).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'challenge', reason: 'challenge_stale: timeout-or-duplicate' });
    expect(r.store.calls).toBe(1);
    const live = await r.live();
    // Missing: no token (1) and stale tokens (2); failed: forged and malformed.
    expect(live.state.tickets_refused_last_minute_here).toMatchObject({ challenge_missing: 3, challenge_failed: 2 });
    expect(live.figures['refused']).toBe('0 over the per-client limit, 2 with a token turnstile refused, 3 sent its widget');
  });

  it('with the provider down and challenge_unavailable = hold: no ticket, a short retry, no store call', async () => {
    const r = rig();
    provider.mode = 'down';
    const page = await r.get({ waiting_room_cha: 'pass-during-outage' });
    expect(page.status).toBe(503);
    expect(page.headers.get('retry-after')).toBe('10');
    expect(cookieFrom(page)).toBeUndefined();
    expect(await page.text()).toContain('data-state="checking"');
    expect(r.logger.last).toMatchObject({ decision: 'challenge_unavailable', reason: 'challenge_down: the provider answered 503' });
    const json = await r.get({ waiting_room_cha: 'pass-during-outage' }, { accept: 'application/json' });
    expect(json.status).toBe(503);
    expect(await json.json()).toMatchObject({ error: expect.stringContaining('the visitor check is not answering') });
    expect(r.store.calls).toBe(0);
    // The token is kept (the provider never spent it): once the provider is back, it gets the ticket.
    provider.mode = 'ok';
    expect(payloadOf(cookieFrom(await r.get({ waiting_room_cha: 'pass-during-outage' }))!)['t']).toBe(1);
  });

  it('with the provider timing out and challenge_unavailable = pass: the ticket, logged as unchecked', async () => {
    const hanging: SiteVerifier = { post: () => new Promise<Response>(() => undefined) };
    const r = rig({ challenge_unavailable: 'pass', challenge_timeout_ms: '100' }, hanging);
    const response = await r.get({ waiting_room_cha: 'whatever' });
    expect(payloadOf(cookieFrom(response)!)).toMatchObject({ k: 'w', t: 1 });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'challenge_down: no answer within 100 ms; let through unchecked (challenge_unavailable = pass)' });
    // Even then, a request without any token gets the widget: only the check's outage is forgiven.
    expect(cookieFrom(await r.get())).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'challenge', reason: 'challenge_missing' });
  });

  it('with challenge_unavailable = pass, a token the provider refuses with a 4xx or an input error gets no ticket', async () => {
    const r = rig({ challenge_unavailable: 'pass' });
    provider.mode = 'canned';
    for (const [status, codes] of [[400, ['invalid-input-response']], [200, ['invalid-input-response']], [200, ['missing-input-response']], [404, []]] as const) {
      provider.canned = { status, body: JSON.stringify({ success: false, 'error-codes': codes }) };
      const response = await r.get({ waiting_room_cha: 'crafted' });
      expect(cookieFrom(response), `${status} ${codes.join()}`).toBeUndefined();
      expect(r.logger.last).toMatchObject({ decision: 'challenge', reason: expect.stringMatching(/^challenge_failed: /) });
    }
    expect(r.store.calls).toBe(0);
  });

  it('checks the host the token was solved on against the request\'s own', async () => {
    const r = rig();
    provider.hostname = 'farm.example';
    expect(cookieFrom(await r.get({ waiting_room_cha: 'pass-farmed-visit' }))).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'challenge', reason: 'challenge_failed: solved on another host (farm.example)' });
    provider.hostname = 'shop.example';
    expect(payloadOf(cookieFrom(await r.get({ waiting_room_cha: 'pass-here-visit' }))!)['t']).toBe(1);
  });

  it('with failed_proof = shadow, sends a refused token to a line that never moves; a stale one gets the widget again', async () => {
    const r = rig({ failed_proof: 'shadow' });
    const shadow = await r.get({ waiting_room_cha: 'forged' });
    expect(payloadOf(cookieFrom(shadow)!)).toMatchObject({ k: 'w', x: 1 });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'challenge_failed: invalid-input-response; shadow queue' });
    const stale = await r.get({ waiting_room_cha: 'expired-1' });
    expect(cookieFrom(stale)).toBeUndefined();
    expect(r.logger.last).toMatchObject({ decision: 'challenge' });
    expect(r.store.calls).toBe(0);
  });

  it('asks the provider at most ticket_limit times for one client in a window: a flood of forged tokens is held first', async () => {
    const r = rig({ ticket_limit: '3', ticket_window_seconds: '10' });
    for (let i = 0; i < 10; i++) await r.get({ waiting_room_cha: `forged-${i}` });
    expect(provider.calls).toHaveLength(3);
    expect(r.logger.last).toMatchObject({ decision: 'ticket_limited', status: 429 });
    // Another client is not affected.
    expect(payloadOf(cookieFrom(await r.get({ waiting_room_cha: 'pass-other' }, {}, '203.0.113.50'))!)['t']).toBe(1);
  });

  it('checks both gates when both are on: the proof of work first, then the widget', async () => {
    const r = rig({ pow_difficulty: '4' });
    const first = await r.get();
    expect(r.logger.last).toMatchObject({ decision: 'pow_challenge', reason: 'pow_missing' });
    expect(cookieFrom(first)).toBeUndefined();
    expect(provider.calls).toHaveLength(0);
  });

  it('on a host with no way to reach a provider, holds new visitors and says why', async () => {
    const r = rig({}, null);
    const response = await r.get({ waiting_room_cha: 'pass-nowhere' });
    expect(response.status).toBe(503);
    expect(r.logger.last).toMatchObject({ decision: 'challenge_unavailable', reason: 'challenge_down: this host has no way to reach a challenge provider' });
  });
});
