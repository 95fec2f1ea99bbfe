/**
 * VIP access codes: made by the operator, shown once, kept in the store only as SHA-256 hashes
 * (a copy of Redis gives away no code), and spent atomically there, one use per visitor.
 */
import { hex, sha256 } from './bytes';

/** Letters and digits without look-alikes (no 0/O, 1/I/L), easy to read out or type. */
const ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
/** 16 characters of a 31-letter alphabet: about 79 bits, beyond guessing at any request rate. */
export const VIP_CODE_LENGTH = 16;
const CODE_PATTERN = new RegExp(`^[${ALPHABET}]{${VIP_CODE_LENGTH}}$`);
/** The query parameter a VIP link carries. */
export const VIP_PARAM = 'wr_vip';

export function createVipCode(): string {
  // Rejection sampling keeps every letter equally likely.
  let code = '';
  while (code.length < VIP_CODE_LENGTH) {
    for (const byte of crypto.getRandomValues(new Uint8Array(32))) {
      if (byte < 248 && code.length < VIP_CODE_LENGTH) code += ALPHABET[byte % ALPHABET.length];
    }
  }
  return code;
}

/** Codes are compared upper-case, ignoring spaces and dashes people add when typing them. */
export function normalizeVipCode(input: string): string | undefined {
  const code = input.replace(/[\s-]/g, '').toUpperCase();
  return CODE_PATTERN.test(code) ? code : undefined;
}

export async function hashVipCode(code: string): Promise<string> {
  return hex(await sha256(code));
}
