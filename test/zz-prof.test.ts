import { it } from 'vitest';
import { startWasmStack, HttpVisitor } from './support/stack';
import { BASE_SECRETS } from './support/fixtures';
it('prof', async () => {
  const stack = await startWasmStack({ viceroyPath: '/tmp/viceroy-trace' });
  try {
    const v = new HttpVisitor(stack.url);
    await v.get('/products');
    await fetch(`${stack.url}/__wr/api/admit?count=5`, { method: 'POST', headers: { authorization: `Bearer ${BASE_SECRETS['admin_api_token']}` } });
    await v.get('/products');
    for (let i = 0; i < 3; i++) await v.get('/products');
  } finally { await stack.close(); }
}, 120000);
