/**
 * Bytes as the core needs them, with the platform's WebCrypto only (the Fastly engine and Node both
 * have it): lower-case hex, SHA-256 of a text, and random hex.
 */

/** Lower-case hex, two digits a byte. */
export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** SHA-256 of a text's UTF-8 bytes. */
export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
}

/** `byteCount` bytes from the platform's cryptographic generator, as hex. */
export function randomHex(byteCount: number): string {
  const bytes = new Uint8Array(byteCount);
  crypto.getRandomValues(bytes);
  return hex(bytes);
}

/** Bytes as base64url without padding (btoa exists on both hosts). */
export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
