// A webhook receiver for the waiting room: verifies each delivery's signature, refuses stale
// (replayed) and forged ones, and acts on each event id once. Node 20+, no dependencies.
//
//   WEBHOOK_SECRET='<the webhook_secret>' PORT=8787 node docs/webhooks/receiver.mjs
//
// Answers 204 to a delivery it took (or had taken before: the sender retries until it gets a 2xx,
// so the same id can come twice), 401 to one whose signature is wrong or too old, 400 otherwise.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('set WEBHOOK_SECRET to the waiting room\'s webhook_secret');
  process.exit(1);
}
/** Deliveries signed longer ago (or further ahead) than this are refused: a replay. */
const TOLERANCE_SECONDS = 300;
/** Event ids acted on, each kept a day (longer than any retry), so a repeat is not acted on twice. */
const seen = new Map();

function verify(header, body) {
  const match = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match) return 'malformed signature header';
  const age = Math.abs(Date.now() / 1000 - Number(match[1]));
  if (age > TOLERANCE_SECONDS) return 'signed too long ago (a replay?)';
  const expected = createHmac('sha256', secret).update(`${match[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2], 'hex')) ? undefined : 'bad signature';
}

function act(event) {
  // Your system goes here: page the on-call, post to a channel, start a report…
  console.log(`event ${event.type} ${event.id} queue=${event.queue} at=${event.time} ${JSON.stringify(event.details)}`);
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const refused = request.method !== 'POST' ? 'POST only' : verify(request.headers['x-wr-signature'], body);
    if (refused) {
      console.log(`refused: ${refused}`);
      response.writeHead(refused === 'POST only' ? 405 : 401).end(refused);
      return;
    }
    let event;
    try {
      event = JSON.parse(body);
    } catch {
      response.writeHead(400).end('not JSON');
      return;
    }
    const now = Date.now();
    for (const [id, at] of seen) if (now - at > 86_400_000) seen.delete(id);
    if (seen.has(event.id)) {
      console.log(`duplicate ${event.id}: taken before`);
    } else {
      seen.set(event.id, now);
      act(event);
    }
    response.writeHead(204).end();
  });
});

server.listen(Number(process.env.PORT ?? 8787), process.env.HOST ?? '127.0.0.1', () => {
  const { address, port } = server.address();
  console.log(`listening on http://${address}:${port}`);
});
