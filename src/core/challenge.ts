/**
 * The challenge hook (`challenge_provider`): a CAPTCHA-style check before a ticket, by a provider
 * with the siteverify form Turnstile and hCaptcha share. The holding page shows the provider's
 * widget; what it produces (a one-use token) comes back in the cookie `<cookie_name>_cha`, and the
 * edge posts it with the secret to the provider's siteverify URL (on Fastly through the named
 * backend `challenge`) before it takes a ticket. A missing or refused token gets no ticket.
 *
 * What the provider answers, and what it means here:
 * - `success: true` with a `hostname` that is the request's host (or none at all): passed; the
 *   ticket is taken and the cookie cleared. A token solved on another host was farmed there: failed.
 * - a token that expired or was used before (`timeout-or-duplicate`, `expired-input-response`,
 *   `already-seen-response`): stale, a new challenge (a person whose page sat open, not a bot);
 * - any other refusal, including every 4xx answer and every error code about the request
 *   (`invalid-input-response`, `missing-input-response`, `bad-request`, codes we do not know):
 *   failed, a new challenge or, with `failed_proof = shadow`, the shadow queue;
 * - no answer within `challenge_timeout_ms`, a 5xx (or any status that is neither 2xx nor 4xx), an
 *   answer that is not JSON, or error codes that are all the provider's own `internal-error` or a
 *   refusal of our secret or site key: the provider is down for us, and `challenge_unavailable`
 *   decides: `hold` (no ticket; the "checking" page tries again) or `pass` (the ticket as if the
 *   check had passed, logged).
 * The visitor chooses the token, so whatever a token can make the provider say must never read as
 * down: with `pass`, that would be a way in unchecked. Hence a code about the input outweighs any
 * other beside it, and a 4xx is the request refused, not the provider failing.
 */
import { describeError } from './auth-throttle';
import { CHALLENGE_PROVIDERS } from './challenge-providers';
import type { Config } from './config';
import type { SiteVerifier } from './ports';
import type { ChallengeHook } from './types';

/** A provider's token as it may travel in a cookie: its alphabet, at most 4,096 characters. */
const TOKEN = /^[A-Za-z0-9._:/+=-]{1,4096}$/;

/** The providers' published test secrets: Turnstile's `1x…AA`, `2x…AA`, `3x…AA`; hCaptcha's `0x0…0`. */
const TEST_SECRETS = /^(?:[123]x0{31}AA|0x0{40})$/;

/** Error codes that mean the token was good once but is no more. */
const STALE_CODES = new Set(['timeout-or-duplicate', 'expired-input-response', 'already-seen-response']);

/**
 * Error codes that mean the provider, or our setup of it (the secret, the site key), failed: none
 * of them can follow from what the visitor sends. Turnstile's `invalid-parsed-secret` and
 * `invalid-widget-id` are about its secret too; every other code counts as the visitor's.
 */
const DOWN_CODES = new Set([
  'internal-error',
  'missing-input-secret',
  'invalid-input-secret',
  'invalid-parsed-secret',
  'invalid-widget-id',
  'sitekey-secret-mismatch',
]);

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
 * is our setup failing, reported as down. `host` is the request's host name: a token the provider
 * says was solved on another host fails. Never throws.
 */
export async function verifyChallenge(
  verifier: SiteVerifier,
  settings: ChallengeSettings,
  secret: string | undefined,
  token: string,
  address: string | undefined,
  host: string,
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
  // A provider's test secret accepts only its public dummy token, which it reports for a host of
  // its own: the host check would refuse the documented test path and protect nothing.
  const expectHost = TEST_SECRETS.test(secret) ? undefined : host;
  try {
    // The answer is read within the same time limit: a provider that sends headers and then stalls is down too.
    const answer = await Promise.race([verifier.post(settings.challengeVerifyUrl, form, timeoutMs).then((r) => readAnswer(r, expectHost)), late]);
    if (answer === 'late') return { kind: 'down', reason: `challenge_down: no answer within ${timeoutMs} ms` };
    return answer;
  } catch (error) {
    return { kind: 'down', reason: `challenge_down: ${describeError(error)}` };
  } finally {
    clearTimeout(timer);
  }
}

async function readAnswer(response: Response, host: string | undefined): Promise<ChallengeVerdict> {
  const refused = response.status >= 400 && response.status < 500;
  if (!response.ok && !refused) {
    await response.body?.cancel().catch(() => undefined);
    return { kind: 'down', reason: `challenge_down: the provider answered ${response.status}` };
  }
  let body: unknown;
  try {
    body = JSON.parse(await response.text());
  } catch {
    body = undefined;
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : undefined;
  const raw = fields?.['error-codes'];
  // Every code is weighed (one about the input among many of ours still makes it the visitor's); five are logged.
  const codes = Array.isArray(raw) ? raw.slice(0, 32).filter((c): c is string => typeof c === 'string') : [];
  const listed = codes.length === 0 ? 'no error code' : codes.slice(0, 5).join(', ');
  const ours = codes.length > 0 && codes.every((c) => DOWN_CODES.has(c));
  if (refused) {
    // Whatever its body says, a 4xx never passes; it is down only when it blames our secret or site key.
    if (ours) return { kind: 'down', reason: `challenge_down: the provider refused our setup (${listed})` };
    return { kind: 'failed', reason: `challenge_failed: the provider answered ${response.status} (${listed})` };
  }
  if (fields === undefined) return { kind: 'down', reason: 'challenge_down: the provider answered something that is not JSON' };
  if (typeof fields['success'] !== 'boolean') return { kind: 'down', reason: 'challenge_down: the provider answered without a success field' };
  if (fields['success']) {
    // Only a host named, and another, refuses: a provider that does not say cannot be held to it.
    const solvedOn = fields['hostname'];
    if (host === undefined || solvedOn === undefined || solvedOn === null || solvedOn === '') return { kind: 'passed' };
    if (typeof solvedOn === 'string' && sameHost(solvedOn, host)) return { kind: 'passed' };
    return { kind: 'failed', reason: `challenge_failed: solved on another host (${describeHost(solvedOn)})` };
  }
  if (ours) return { kind: 'down', reason: `challenge_down: the provider refused our setup (${listed})` };
  // A stale code beside one of ours is still a token that was used or expired: the visitor's.
  if (codes.length > 0 && codes.every((c) => STALE_CODES.has(c) || DOWN_CODES.has(c))) return { kind: 'stale', reason: `challenge_stale: ${listed}` };
  return { kind: 'failed', reason: `challenge_failed: ${listed}` };
}

/** Host names compare as DNS does: without regard to case or a final dot. */
function sameHost(a: string, b: string): boolean {
  const canon = (h: string) => h.toLowerCase().replace(/\.$/, '');
  return canon(a) === canon(b);
}

/** The provider's hostname as the log may show it: short, and only characters a host name has. */
function describeHost(value: unknown): string {
  if (typeof value !== 'string') return `a ${typeof value}`;
  return value.slice(0, 64).replace(/[^A-Za-z0-9.:[\]-]/g, '?');
}
