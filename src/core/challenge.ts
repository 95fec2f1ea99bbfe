/**
 * The challenge hook (`challenge_provider`): a CAPTCHA-style check before a ticket, by a provider
 * with the siteverify form Turnstile and hCaptcha share. The holding page shows the provider's
 * widget; what it produces (a one-use token) comes back in the cookie `<cookie_name>_cha`, and the
 * edge posts it with the secret to the provider's siteverify URL (on Fastly through the named
 * backend `challenge`) before it takes a ticket. A missing or refused token gets no ticket.
 *
 * What the provider answers, and what it means here:
 * - `success: true`: passed; the ticket is taken and the cookie cleared.
 * - a token that expired or was used before (`timeout-or-duplicate`, `expired-input-response`,
 *   `already-seen-response`): stale, a new challenge (a person whose page sat open, not a bot);
 * - any other refusal of the token: failed, a new challenge or, with `failed_proof = shadow`, the
 *   shadow queue;
 * - no answer within `challenge_timeout_ms`, an error status, an answer that is not JSON, the
 *   provider's own `internal-error`, or a refusal of our secret or site key: the provider is down
 *   for us, and `challenge_unavailable` decides: `hold` (no ticket; the "checking" page tries again)
 *   or `pass` (the ticket as if the check had passed, logged).
 */
import { describeError } from './auth-throttle';
import { CHALLENGE_PROVIDERS } from './challenge-providers';
import type { Config } from './config';
import type { SiteVerifier } from './ports';
import type { ChallengeHook } from './types';

/** A provider's token as it may travel in a cookie: its alphabet, at most 4,096 characters. */
const TOKEN = /^[A-Za-z0-9._:/+=-]{1,4096}$/;

/** Error codes that mean the token was good once but is no more. */
const STALE_CODES = new Set(['timeout-or-duplicate', 'expired-input-response', 'already-seen-response']);

/** Error codes that mean the provider, or our setup of it, failed: not the visitor's doing. */
const DOWN_CODES = new Set(['internal-error', 'missing-input-secret', 'invalid-input-secret', 'sitekey-secret-mismatch']);

export type ChallengeSettings = Pick<
  Config,
  'cookieName' | 'challengeProvider' | 'challengeSiteKey' | 'challengeVerifyUrl' | 'challengeScriptUrl' | 'challengeWidgetClass' | 'challengeTimeoutMs'
>;

export type ChallengeVerdict =
  | { readonly kind: 'passed' }
  | { readonly kind: 'stale' | 'failed' | 'down'; readonly reason: string };

/** The name of the cookie a provider's token is sent in. */
export function challengeCookieName(settings: Pick<Config, 'cookieName'>): string {
  return `${settings.cookieName}_cha`;
}

/** The origins the page must allow the widget to load from, frame and call (its Content-Security-Policy). */
export function challengeSources(settings: Pick<Config, 'challengeProvider' | 'challengeScriptUrl'>): readonly string[] {
  if (settings.challengeProvider === 'none') return [];
  const own = /^https?:\/\/[^/]+/.exec(settings.challengeScriptUrl)?.[0];
  const preset = CHALLENGE_PROVIDERS[settings.challengeProvider];
  return [...new Set([...(own === undefined ? [] : [own]), ...(settings.challengeScriptUrl === preset.scriptUrl ? preset.sources : [])])];
}

/** What the holding page needs to show the widget. */
export function challengeHook(settings: ChallengeSettings): ChallengeHook {
  return {
    provider: settings.challengeProvider === 'none' ? 'turnstile' : settings.challengeProvider,
    siteKey: settings.challengeSiteKey,
    script: settings.challengeScriptUrl,
    widget: settings.challengeWidgetClass,
    cookie: challengeCookieName(settings),
  };
}

/**
 * Asks the provider about a token. `secret` undefined (the Secret Store has no `challenge_secret`)
 * is our setup failing, reported as down. Never throws.
 */
export async function verifyChallenge(
  verifier: SiteVerifier,
  settings: ChallengeSettings,
  secret: string | undefined,
  token: string,
  address: string | undefined,
): Promise<ChallengeVerdict> {
  if (!TOKEN.test(token)) return { kind: 'failed', reason: 'challenge_malformed' };
  if (secret === undefined || secret === '') return { kind: 'down', reason: 'challenge_down: the secret challenge_secret is not set' };
  const form = new URLSearchParams({ secret, response: token });
  if (address !== undefined) form.set('remoteip', address);
  // hCaptcha checks the site key the token was made for when it is sent; Turnstile does not take it.
  if (settings.challengeProvider === 'hcaptcha') form.set('sitekey', settings.challengeSiteKey);
  const timeoutMs = settings.challengeTimeoutMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs);
  });
  try {
    // The answer is read within the same time limit: a provider that sends headers and then stalls is down too.
    const answer = await Promise.race([verifier.post(settings.challengeVerifyUrl, form, timeoutMs).then(readAnswer), late]);
    if (answer === 'late') return { kind: 'down', reason: `challenge_down: no answer within ${timeoutMs} ms` };
    return answer;
  } catch (error) {
    return { kind: 'down', reason: `challenge_down: ${describeError(error)}` };
  } finally {
    clearTimeout(timer);
  }
}

async function readAnswer(response: Response): Promise<ChallengeVerdict> {
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    return { kind: 'down', reason: `challenge_down: the provider answered ${response.status}` };
  }
  let body: unknown;
  try {
    body = JSON.parse(await response.text());
  } catch {
    return { kind: 'down', reason: 'challenge_down: the provider answered something that is not JSON' };
  }
  if (typeof body !== 'object' || body === null || typeof (body as { success?: unknown }).success !== 'boolean') {
    return { kind: 'down', reason: 'challenge_down: the provider answered without a success field' };
  }
  const { success } = body as { success: boolean };
  if (success) return { kind: 'passed' };
  const raw = (body as Record<string, unknown>)['error-codes'];
  const codes = Array.isArray(raw) ? raw.filter((c): c is string => typeof c === 'string').slice(0, 5) : [];
  const listed = codes.length === 0 ? 'no error code' : codes.join(', ');
  if (codes.some((c) => DOWN_CODES.has(c))) return { kind: 'down', reason: `challenge_down: the provider refused our setup (${listed})` };
  if (codes.length > 0 && codes.every((c) => STALE_CODES.has(c))) return { kind: 'stale', reason: `challenge_stale: ${listed}` };
  return { kind: 'failed', reason: `challenge_failed: ${listed}` };
}
