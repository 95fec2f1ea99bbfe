/**
 * Console accounts end to end, the same on every host (the Node host, the wasm on a Compute host):
 * a viewer reads everything and every change of theirs is refused, an operator admits but may not
 * reset, an admin resets, the origin's token acts as `api`, and the audit trail (console list,
 * JSON, log lines) says who did what. The stack runs with ACCOUNTS_SECRET beside `admin_password`.
 * Also prints what a sign-in costs there, first (the KDF) and then from the instance's cache.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ACCOUNT_PASSWORDS, ADMIN_PASSWORD, API_TOKEN } from './fixtures';
import { HttpVisitor, type Stack } from './stack';

type Name = keyof typeof ACCOUNT_PASSWORDS;
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const as = (name: Name | 'admin') => basic(name, name === 'admin' ? ADMIN_PASSWORD : ACCOUNT_PASSWORDS[name]);

export function defineAccountsScenario(stack: () => Stack): void {
  const get = (name: Name | 'admin', path: string) => fetch(`${stack().url}/__wr/${path}`, { headers: { authorization: as(name) } });
  const post = async (name: Name | 'admin', path: string, fields: Record<string, string>): Promise<Response> => {
    // The form token comes with the live figures, which every role may read.
    const csrf = ((await (await get(name, 'admin/live')).json()) as { csrf: string }).csrf;
    return fetch(`${stack().url}/__wr/${path}`, {
      method: 'POST',
      headers: { authorization: as(name), 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      body: new URLSearchParams({ csrf, ...fields }).toString(),
    });
  };
  const errorOf = async (response: Response): Promise<string> => ((await response.json()) as { error: string }).error;
  const trail = async () => ((await (await get('vera', 'admin/audit')).json()) as { entries: Record<string, unknown>[] }).entries;

  describe('console accounts', () => {
    beforeEach(async () => {
      await stack().direct.flushall();
      stack().clearLogs();
    });

    it('a viewer reads the console, figures and trail, and every change is refused with a 403 that says why', async () => {
      for (const path of ['admin', 'admin/state', 'admin/live', 'admin/audit']) expect((await get('vera', path)).status, path).toBe(200);
      const page = await (await get('vera', 'admin')).text();
      expect(page).toContain('Signed in as <strong>vera</strong> (viewer)');
      const enabled = [...page.matchAll(/<(button|select|input)\b[^>]*>/g)].map((m) => m[0]).filter((tag) => !tag.includes('type="hidden"') && !/\sdisabled\b/.test(tag));
      expect(enabled).toEqual([]);
      for (const [path, fields] of [
        ['admin/admit', { count: '1' }],
        ['admin/control', { paused: 'true' }],
        ['admin/control', { switch: 'hold' }],
        ['admin/vip', { count: '1' }],
        ['admin/reset', { confirm: 'default' }],
      ] as const) {
        const refused = await post('vera', path, fields);
        expect(refused.status, path).toBe(403);
        expect(await errorOf(refused)).toMatch(/"vera" is a viewer: it may not .*nothing changed/);
      }
      const state = (await (await get('vera', 'admin/state')).json()) as { paused: boolean; switch: string };
      expect([state.paused, state.switch]).toEqual([false, 'normal']);
      expect(await trail()).toEqual([]);
    });

    it('an operator admits but may not reset, an admin resets, the origin acts as api: the trail and the log say who did what', async () => {
      for (let i = 0; i < 3; i++) await new HttpVisitor(stack().url).get('/');
      expect((await post('otto', 'admin/admit', { count: '2' })).status).toBe(200);
      const refused = await post('otto', 'admin/reset', { confirm: 'default' });
      expect(refused.status).toBe(403);
      expect(await errorOf(refused)).toMatch(/"otto" is an operator: it may not reset the queue/);
      expect((await post('ada', 'admin/control', { paused: 'true' })).status).toBe(200);
      expect((await post('ada', 'admin/reset', { confirm: 'default' })).status).toBe(200);
      const api = await fetch(`${stack().url}/__wr/api/control`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: '{"paused": false}' });
      expect(api.status).toBe(200);
      expect((await post('admin', 'admin/admit', { count: '1' })).status).toBe(200);
      const entries = await trail();
      expect(entries.map((e) => [e['actor'], e['role'], e['action'], e['change']])).toEqual([
        ['admin', 'admin', 'admit', 'Let 0 visitors in (asked 1).'],
        ['api', 'api', 'control', 'Admission resumed.'],
        ['ada', 'admin', 'reset', 'Reset queue default.'],
        ['ada', 'admin', 'control', 'Admission paused.'],
        ['otto', 'operator', 'admit', 'Let 2 visitors in (asked 2).'],
      ]);
      expect(new Set(entries.map((e) => e['client']))).toEqual(new Set(['127.0.0.1']));
      // The console lists them, newest first.
      const page = await (await get('vera', 'admin')).text();
      expect([...page.matchAll(/<strong data-actor>([^<]+)<\/strong>/g)].map((m) => m[1])).toEqual(['admin', 'api', 'ada', 'ada', 'otto']);
      // Each change's log line names the actor and the change.
      await expect.poll(() => stack().logs().filter((l) => l.status === 200 && /\/(admit|control|reset)$/.test(l.path)).map((l) => [l.actor, l.reason]), { timeout: 5_000 }).toEqual([
        ['otto', 'admitted 2'],
        ['ada', 'control Admission paused.'],
        ['ada', 'reset'],
        ['api', 'control Admission resumed.'],
        ['admin', 'admitted 0'],
      ]);
    });

    it('signs out with a 401 in the console\'s realm; signing in again at that prompt returns to the console', async () => {
      const out = await get('otto', 'admin/sign-out');
      expect(out.status).toBe(401);
      expect(out.headers.get('www-authenticate')).toMatch(/^Basic realm="waiting room admin"/);
      expect(out.headers.get('set-cookie')).toMatch(/^wr_signed_out=1;/);
      const again = await fetch(`${stack().url}/__wr/admin/sign-out`, { headers: { authorization: as('otto'), cookie: 'wr_signed_out=1' }, redirect: 'manual' });
      expect(again.status).toBe(303);
      expect(again.headers.get('location')).toBe('/__wr/admin');
    });

    it('prints what a sign-in costs here: the first (the KDF, 1,000 iterations) and the next ones (cached)', async () => {
      const times: number[] = [];
      for (let i = 0; i < 6; i++) {
        const started = performance.now();
        expect((await get('ada', 'admin/state')).status).toBe(200);
        times.push(performance.now() - started);
      }
      const wrong: number[] = [];
      for (let i = 0; i < 2; i++) {
        const started = performance.now();
        expect((await fetch(`${stack().url}/__wr/admin/state`, { headers: { authorization: basic('ada', `not-the-password-${i}`) } })).status).toBe(401);
        wrong.push(performance.now() - started);
      }
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      console.log(`sign-in cost (${stack().kind}): first ${times[0]!.toFixed(1)} ms, then median ${median(times.slice(1)).toFixed(1)} ms; a wrong password (always the KDF) median ${median(wrong).toFixed(1)} ms`);
    });
  });
}
