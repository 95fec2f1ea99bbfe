/**
 * The control for the engine checks: one check here must fail, and so must the build
 * (`node src/node/build.mjs engine-checks-fail`). If this build ever succeeds, a failing check in
 * test/engine/checks.ts would not fail the build either, and those checks would prove nothing.
 *
 * A passing check runs first, so a failure here is the assertion's and not a broken bundle's.
 */
import { parseKeyRing, signToken, verifyToken, type TokenClaims } from '../../src/core/tokens';

const NOW_MS = Date.UTC(2025, 0, 15, 12, 0, 0);
const iat = Math.floor(NOW_MS / 1000);
const claims: TokenClaims = { q: 'default', k: 'a', t: 1, iat, exp: iat + 1800 };
const ring = parseKeyRing('k1:control-check-secret-0123456789abcdef');
const forger = parseKeyRing('k1:a-forgers-own-secret-0123456789abcdef');

const failed: string[] = [];
let passed = 0;

async function check(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
    passed += 1;
    console.log(`ok   ${name}`);
  } catch (error) {
    failed.push(name);
    console.log(`FAIL ${name}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

await check('control: a genuine token verifies', async () => {
  const result = await verifyToken(ring, await signToken(ring, claims), 'default', NOW_MS, ['w', 'a']);
  if (!result.ok) throw new Error(`expected ok, got ${result.reason}`);
});

await check('control: a forged token verifies (must fail)', async () => {
  const forged = await signToken(forger, claims);
  const result = await verifyToken(ring, forged, 'default', NOW_MS, ['w', 'a']);
  if (!result.ok) throw new Error(`expected ok, got ${result.reason}`);
});

console.log(`engine checks (control): ${passed} passed, ${failed.length} failed`);
if (failed.length > 0) throw new Error(`engine checks failed: ${failed.join('; ')}`);
