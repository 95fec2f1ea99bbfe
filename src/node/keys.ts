/**
 * `npm run keys`: new production secrets, printed once, for the Fastly Secret Store (wr_secrets).
 * Nothing is written anywhere: copy each value into its entry, e.g.
 * `npx fastly secret-store-entry create --store-id <secret store id> --name signing_keys --recreate-allow --stdin`,
 * then paste (docs/deploying.md, step 10, says where the store's ID comes from).
 *
 * - signing_keys: a key ring of one key (`<kid>:<32 random bytes, base64url>`);
 * - admin_password: 24 random characters;
 * - admin_api_token: 32 random bytes, base64url (the origin's bearer token);
 * - admission_keys: a new P-256 key pair as a private JWK in a JSON array (the signed admission;
 *   the public half is what `/__wr/.well-known/jwks.json` will publish).
 * `npm run keys -- admission_keys` prints only the one named (to rotate it: put the new JWK first
 * in the array, keep the old one after it until its admissions have expired).
 *
 * `npm run keys -- hash-password [--iterations N]` reads a console account's password from stdin
 * (never from the command line, which shell history and `ps` keep) and prints its hash for the
 * `admin_accounts` secret (see src/core/accounts.ts).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseSecrets, SECRET_KEYS } from '../core/config';
import { parseAdmissionKeys } from '../core/admission-keys';
import { DEFAULT_ITERATIONS, hashPassword, parsePasswordHash } from '../core/accounts';
import { passwordWeakness } from '../core/config';

const stamp = new Date().toISOString().slice(0, 10).replace(/-/g, '');
const kid = (prefix: string) => `${prefix}${stamp}${randomBytes(2).toString('hex')}`;

function admissionKey(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  return JSON.stringify([{ kid: kid('adm'), kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, d: jwk.d }]);
}

const makers: Record<string, () => string> = {
  signing_keys: () => `${kid('k')}:${randomBytes(32).toString('base64url')}`,
  admin_password: () => randomBytes(18).toString('base64url'),
  admin_api_token: () => randomBytes(32).toString('base64url'),
  admission_keys: admissionKey,
};

/** New values for the secrets named (all it can make when none), checked as the service checks them. */
export function generateSecrets(asked: readonly string[] = []): Record<string, string> {
  const unknown = asked.filter((name) => makers[name] === undefined);
  if (unknown.length > 0) {
    throw new Error(`no generator for ${unknown.join(', ')}; choose among ${Object.keys(makers).join(', ')} (${SECRET_KEYS.filter((k) => makers[k] === undefined).join(', ')} come from your providers)`);
  }
  const values = Object.fromEntries((asked.length === 0 ? Object.keys(makers) : asked).map((name) => [name, makers[name]!()]));
  // Made here, checked here: the service would refuse a weak or broken one the same way.
  if (values['admission_keys'] !== undefined) parseAdmissionKeys(values['admission_keys']);
  parseSecrets((key) => values[key] ?? (key === 'signing_keys' ? makers['signing_keys']!() : undefined));
  return values;
}

/**
 * A password's hash for `admin_accounts`, refusing a password the service would refuse as
 * `admin_password` (shorter than 12 characters, or among the first ones anyone tries).
 */
export async function hashForAccount(password: string, iterations = DEFAULT_ITERATIONS): Promise<string> {
  const trimmed = password.replace(/\r?\n$/, '');
  if (trimmed.length < 12) throw new Error('the password must be at least 12 characters');
  const weak = passwordWeakness(trimmed);
  if (weak !== undefined) throw new Error(`the password ${weak}`);
  const hash = await hashPassword(trimmed, iterations);
  parsePasswordHash(hash);
  return hash;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function hashPasswordCommand(args: readonly string[]): Promise<void> {
  let iterations = DEFAULT_ITERATIONS;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--iterations' && /^[0-9]+$/.test(args[i + 1] ?? '')) iterations = Number(args[++i]);
    else throw new Error(`hash-password takes only --iterations <number>, got ${JSON.stringify(args[i])}; the password comes on stdin`);
  }
  if (process.stdin.isTTY) process.stderr.write('Type the password, then Enter and Ctrl-D:\n');
  const hash = await hashForAccount(await readStdin(), iterations);
  process.stdout.write(`${hash}\n`);
  process.stderr.write(`Put it in admin_accounts, e.g. {"alice": {"role": "operator", "hash": "${hash}"}}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === 'hash-password') {
  hashPasswordCommand(process.argv.slice(3)).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  });
} else if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    for (const [name, value] of Object.entries(generateSecrets(process.argv.slice(2)))) process.stdout.write(`${name}\n${value}\n\n`);
    process.stderr.write('Shown once: put each value in the Secret Store (wr_secrets) under its name; they are not saved anywhere.\n');
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  }
}
