/**
 * The challenge providers the hook knows by name (see challenge.ts): where each one's siteverify
 * and widget script are, the class its script renders into, and the origins its widget loads from.
 * Any other provider with the same siteverify form is set up through the URL and class settings.
 */
export type ChallengeProviderName = 'turnstile' | 'hcaptcha';

/** What each provider's widget needs, and where its siteverify is. */
export const CHALLENGE_PROVIDERS: Readonly<
  Record<ChallengeProviderName, { readonly verifyUrl: string; readonly scriptUrl: string; readonly widgetClass: string; readonly sources: readonly string[] }>
> = {
  turnstile: {
    verifyUrl: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
    scriptUrl: 'https://challenges.cloudflare.com/turnstile/v0/api.js',
    widgetClass: 'cf-turnstile',
    sources: ['https://challenges.cloudflare.com'],
  },
  hcaptcha: {
    verifyUrl: 'https://api.hcaptcha.com/siteverify',
    scriptUrl: 'https://js.hcaptcha.com/1/api.js',
    widgetClass: 'h-captcha',
    sources: ['https://hcaptcha.com', 'https://*.hcaptcha.com'],
  },
};
