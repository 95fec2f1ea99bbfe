/**
 * The console's notice after a form post made without its script: the post answers with a redirect
 * to the console, and the address carries what the post did (`?done=<text>&done_tag=<tag>`), so that
 * the page can say it. The console shows the text as its own status line, so it must be text this
 * service wrote: the tag is an HMAC of the queue, the time and the text, made with a key derived
 * from the signing key ring for this purpose alone (see tokens.ts), and it is good for a few
 * minutes. A link written by someone else ("Reset queue default. Let 100,000 visitors in." pasted
 * into an incident chat) has no valid tag, and the console shows nothing for it.
 */
import { base64url } from './bytes';
import type { KeyRing } from './tokens';

/** How long a notice is shown again on a reload of the page the post led to. */
export const NOTICE_LIFETIME_SECONDS = 300;
/** Our notices are short sentences; a longer text is not ours and is not worth an HMAC. */
const MAX_NOTICE_LENGTH = 1000;
/** `<key id>.<issued at, seconds>.<HMAC-SHA256 in base64url>`, the MAC spelt the one way it can be (as in tokens.ts). */
const TAG_PATTERN = /^([A-Za-z0-9._-]{1,32})\.([0-9]{1,12})\.([A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])$/;

/** What the tag covers: the queue (a notice of one queue is not shown on another's page), the time and the text. */
const signedBytes = (queue: string, iat: number, text: string): Uint8Array<ArrayBuffer> => new TextEncoder().encode(`${queue}\n${iat}\n${text}`);

/** The query parameters (without a leading `?` or `&`) that make the console show `text` for a few minutes. */
export async function noticeQuery(ring: KeyRing, queue: string, text: string, nowMs: number): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  const mac = await crypto.subtle.sign('HMAC', await ring.current.keyFor('admin-notice'), signedBytes(queue, iat, text));
  const tag = `${ring.current.kid}.${iat}.${base64url(new Uint8Array(mac))}`;
  return `done=${encodeURIComponent(text)}&done_tag=${encodeURIComponent(tag)}`;
}

/**
 * The notice a console address carries, when its tag is ours, for this queue and recent; otherwise
 * the empty string (nothing is shown, and nothing says why: the page is the same as without it).
 */
export async function readNotice(ring: KeyRing, queue: string, params: URLSearchParams, nowMs: number): Promise<string> {
  const texts = params.getAll('done');
  const tags = params.getAll('done_tag');
  if (texts.length !== 1 || tags.length !== 1) return '';
  const text = texts[0]!;
  const match = TAG_PATTERN.exec(tags[0]!);
  if (match === null || text.length > MAX_NOTICE_LENGTH) return '';
  const [, kid, iatText, macText] = match as unknown as [string, string, string, string];
  const key = ring.byKid.get(kid);
  const iat = Number(iatText);
  const now = Math.floor(nowMs / 1000);
  // A few seconds ahead are allowed: the POP that signed may be one whose clock runs slightly ahead.
  if (key === undefined || iat > now + 5 || now - iat > NOTICE_LIFETIME_SECONDS) return '';
  let mac: Uint8Array<ArrayBuffer>;
  try {
    mac = Uint8Array.from(atob(macText.replace(/-/g, '+').replace(/_/g, '/') + '='), (c) => c.charCodeAt(0));
  } catch {
    return '';
  }
  // verify compares in constant time.
  const ok = await crypto.subtle.verify('HMAC', await key.keyFor('admin-notice'), mac, signedBytes(queue, iat, text));
  return ok ? text : '';
}
