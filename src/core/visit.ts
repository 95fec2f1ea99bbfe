/**
 * The visit decision, steps 4 and 5 of the request path: the visitor's cookie, then what the store
 * must say (a ticket, a poll, a claim, a draw, a slot's refresh). The only part of the request path
 * that changes the queue for a visitor; its answer is a `Visit`, which respond.ts turns into a
 * response.
 *
 * Two admission modes, decided by the thresholds in effect (configured or set at runtime):
 * - rate mode: a called ticket (`ticket <= cursor`) claims its admission in the store (one call per
 *   admitted visitor, so that a call nobody takes up in time goes to the next ticket), then becomes
 *   an access token;
 * - capacity mode (`max_active` / `max_new_per_minute`): a called ticket claims a slot in the store
 *   (one call), the access token then carries the slot, refreshed at most once per
 *   `activity_refresh_seconds`, and the slot is freed when the visitor leaves or the origin says so.
 */
import { describeError } from './auth-throttle';
import { randomHex } from './bytes';
import { countStoreError } from './metrics';
import { returnTally, takeTally } from './edge-tally';
import { blocksOf, joinUnderWay, leadJoin, observeState, type BlockJoin } from './edge-blocks';
import type { HandedTicket, TicketBlocks } from './ticket-blocks';
import { shardForNewVisitor, withShard, type HandlerContext } from './context';
import { readCookieValues } from './cookies';
import type { DrawResult, JoinOptions, JoinResult, QueueState } from './ports';
import { createShuffle } from './shuffle';
import type { AdmissionVia, Grant } from './admission';
import { challengeCookieName, challengeHook, verifyChallenge } from './challenge';
import { checkSolution, issueChallenge, powCookieName, spentOnce } from './proof-of-work';
import { allowNewTicket, countRefusal } from './ticket-limit';
import type { StoreOutcome } from './store-call';
import { sharedTokenCache } from './token-cache';
import { precheckToken, type TokenClaims, type TokenKind, type VerifyFailure, type VerifyResult } from './tokens';
import { eventPhase, isCapacityMode, peopleAhead, waitingOf, type Trace, type Visit } from './types';

/** Carries a store failure out of a cache load, so it is not cached and every waiter sees it. */
class StoreUnavailable extends Error {
  constructor(readonly outcome: StoreOutcome<never>) {
    super(outcome.ok ? 'store unavailable' : outcome.message);
  }
}

/**
 * The most signature checks one request's cookies of ours may cost (duplicates are legal). A value
 * refused without crypto (see precheckToken: junk, another queue's, expired) and a token this host
 * verified before (the token cache) cost none, so junk sent before a real token cannot push it out.
 */
export const MAX_COOKIES_CHECKED = 4;

/** The queue cookie holds a waiting ticket or an access token, never another kind. */
const VISITOR_KINDS: readonly TokenKind[] = ['w', 'a'];

/** An access token holds a capacity slot when it carries the time of the slot's last refresh. */
export function holdsSlot(token: TokenClaims): boolean {
  return token.r !== undefined;
}

/** When an access token's session began, seconds: `s`, or its issue time for tokens issued at admission without one. */
export function sessionStart(token: TokenClaims): number {
  return token.s ?? token.iat;
}

/** Which life of the queue a ticket belongs to: the reset epoch and the store generation. */
interface Era {
  readonly epoch: number;
  readonly generation: number;
}

/**
 * A ticket's generation is not the store's: the store lost its state since it was taken. A token
 * without one (issued before generations existed) counts as current, and so does a state without one.
 */
function isForeign(generation: number | undefined, state: Pick<QueueState, 'generation'>): boolean {
  return generation !== undefined && generation !== 0 && state.generation !== 0 && generation !== state.generation;
}

/** A store failure this POP remembers (see pollState): what the failed call said. */
class RememberedFailure extends Error {}

/** The key under which a POP remembers a failed store call for a cache lifetime (see pollState). */
const failedKeyOf = (ctx: HandlerContext): string => `${ctx.cacheKey}:failed`;

/** Remembers a failed call of the visitor path at this POP for a cache lifetime (none with the cache off). */
async function rememberFailure(ctx: HandlerContext, outcome: Extract<StoreOutcome<unknown>, { ok: false }>): Promise<void> {
  if (ctx.config.stateCacheSeconds === 0) return;
  const said = `${outcome.reason}: ${outcome.message}`;
  // Not remembered if the cache fails here: the next request asks the store, as without this.
  await ctx.cache.getOrLoad(failedKeyOf(ctx), ctx.config.stateCacheSeconds, async () => said).catch(() => undefined);
}

/** What the last failed call said, while this POP remembers it; undefined otherwise (or when the cache fails). */
async function rememberedFailure(ctx: HandlerContext): Promise<string | undefined> {
  if (ctx.config.stateCacheSeconds === 0) return undefined;
  return ctx.cache.peek<string>(failedKeyOf(ctx)).catch(() => undefined);
}

/** A request answered from a remembered failure: noted as the store's error, and counted as one. */
async function answeredFromFailure(ctx: HandlerContext, trace: Trace, said: string): Promise<void> {
  trace.cache = 'hit';
  trace.storeError = `remembered for up to ${ctx.config.stateCacheSeconds} s at this POP: ${said}`;
  // Still counted where it is served, so the operator's store-error figure does not drop.
  await countStoreError(ctx.deps.ticketLimiter, ctx.queue);
}

/**
 * A waiting visitor's poll: from the per-POP cache when it holds a fresh state, else one store
 * call (which also runs admission) whose answer the cache keeps for its lifetime.
 *
 * A failed call is remembered for a cache lifetime too, under its own key: the polls that follow
 * in this POP get the same failure without asking the store. A store that fails fast (Upstash's
 * 429 once a database is over its request limit, a proxy's error page) would otherwise get a call
 * for every waiting visitor's poll, and stay over its limit because of them: a failing store gets
 * no more calls than a healthy one. It is asked again once the remembered failure expires.
 */
export async function pollState(ctx: HandlerContext, trace: Trace, nowMs: number): Promise<StoreOutcome<QueueState>> {
  const { config, store, cache, queue, cacheKey, storeCall } = ctx;
  const direct = async (): Promise<StoreOutcome<QueueState>> => {
    const outcome = await storeCall(trace, () => store.poll(queue, nowMs, ctx.statePolicy()));
    // A fresh answer of another epoch or generation voids this instance's blocks (see edge-blocks.ts).
    if (outcome.ok) observeState(ctx.blockScope, outcome.value);
    return outcome;
  };
  if (config.stateCacheSeconds === 0) return direct();
  try {
    const { value, hit } = await cache.getOrLoad(cacheKey, config.stateCacheSeconds, async () => {
      const failed = await rememberedFailure(ctx);
      if (failed !== undefined) throw new RememberedFailure(failed);
      const outcome = await direct();
      if (!outcome.ok) {
        await rememberFailure(ctx, outcome);
        throw new StoreUnavailable(outcome);
      }
      return outcome.value;
    });
    trace.cache = hit ? 'hit' : 'miss';
    return { ok: true, value, ms: trace.storeMs ?? 0 };
  } catch (error) {
    if (error instanceof RememberedFailure) {
      await answeredFromFailure(ctx, trace, error.message);
      return { ok: false, reason: 'error', message: error.message, ms: 0 };
    }
    trace.cache = 'miss';
    if (error instanceof StoreUnavailable) {
      // Another request of this POP made the call this one waited for: its log line says why too,
      // and it is counted as the remembered ones are.
      if (trace.storeError === undefined && !error.outcome.ok) {
        trace.storeError = `shared another request's call at this POP: ${error.outcome.reason}: ${error.outcome.message}`;
        await countStoreError(ctx.deps.ticketLimiter, ctx.queue);
      }
      return error.outcome;
    }
    // The cache itself failed: the store still answers, one call per poll.
    trace.reason = `cache: ${describeError(error)}`;
    return direct();
  }
}

/**
 * The best valid token among the cookies sent (see chooseToken). Values that fail the checks
 * needing no crypto are dropped first, and at most MAX_COOKIES_CHECKED signatures are checked.
 */
export async function readToken(ctx: HandlerContext, request: Request, nowMs: number, trace: Trace): Promise<TokenClaims | undefined> {
  const { config, secrets, queue } = ctx;
  const values = [...new Set(readCookieValues(request.headers.get('cookie'), config.cookieName))];
  if (values.length === 0) return undefined;
  const valid: TokenClaims[] = [];
  const unchecked: string[] = [];
  let failure: VerifyFailure | undefined;
  const note = (result: VerifyResult): void => {
    // A database this queue does not have (fewer store_shards than when it was signed): invalid.
    if (result.ok && (result.claims.sh ?? 0) >= config.storeShards) failure ??= 'bad_claims';
    else if (result.ok) valid.push(result.claims);
    else failure ??= result.reason;
  };
  for (const value of values) {
    // Remembered once verified (see token-cache): an admitted visitor's every request carries the
    // same cookie, answered by a lookup before anything decodes it.
    const known = sharedTokenCache.lookup(secrets.keyRing, value, queue, nowMs, VISITOR_KINDS);
    if (known !== undefined) {
      note(known);
      continue;
    }
    const refused = precheckToken(secrets.keyRing, value, queue, nowMs, VISITOR_KINDS);
    if (refused !== undefined) failure ??= refused;
    else if (unchecked.length < MAX_COOKIES_CHECKED) unchecked.push(value);
  }
  const results = await Promise.all(unchecked.map((v) => sharedTokenCache.verify(secrets.keyRing, v, queue, nowMs, VISITOR_KINDS)));
  results.forEach(note);
  const best = chooseToken(valid);
  if (best === undefined && failure !== undefined) trace.reason = `token_${failure}`;
  return best;
}

/**
 * Which of several valid tokens a request's cookies come to. A browser sends two cookies of one
 * name when one was set for a parent domain or a longer path, which a sibling subdomain or user
 * content on one can do ("cookie tossing"): a planted token must not take the visitor's place.
 * In order: an access token; a ticket of the current era; a pending join; a ticket of an older
 * era; a shadow ticket (the last two lead nowhere: a new ticket at the back, or a place that never
 * moves); within a class, the lowest ticket.
 *
 * The current era is that of the ticket taken last (its join time). A ticket of the current epoch
 * and generation was taken after every ticket of an older one (a reset or a lost state voids
 * what came before), and no token can claim a later era than the store's, since only we sign them;
 * when every ticket sent is of an older era, the poll finds that out as before.
 */
export function chooseToken(tokens: readonly TokenClaims[]): TokenClaims | undefined {
  let newest: TokenClaims | undefined;
  for (const token of tokens) {
    if (token.k !== 'w' || token.x === 1 || token.p !== undefined) continue;
    if (newest === undefined || (token.j ?? token.iat) > (newest.j ?? newest.iat)) newest = token;
  }
  const rank = (token: TokenClaims): number => {
    if (token.k === 'a') return 0;
    if (token.x === 1) return 4;
    if (token.p !== undefined) return 2;
    return newest !== undefined && sameEra(token, newest) ? 1 : 3;
  };
  let best: TokenClaims | undefined;
  for (const token of tokens) {
    if (best === undefined) best = token;
    else if (rank(token) < rank(best) || (rank(token) === rank(best) && token.k === 'w' && token.t < best.t)) best = token;
  }
  return best;
}

function sameEra(a: TokenClaims, b: TokenClaims): boolean {
  return (a.g ?? 0) === (b.g ?? 0) && (a.gen ?? 0) === (b.gen ?? 0);
}

function record(trace: Trace, state: QueueState, ticket: number): void {
  trace.ticket = ticket;
  trace.cursor = state.cursor;
  trace.tail = state.tail;
}

/**
 * A waiting ticket's cookie: the arrival ticket, the join time, the first place shown, and the
 * queue's epoch and store generation the ticket belongs to (from a state, or kept from the token).
 */
export function waitingCookie(ctx: HandlerContext, ticket: number, joined: number, nowMs: number, first: number | undefined, era: Era): Promise<string> {
  const { issue } = ctx;
  return issue('w', ticket, nowMs, { j: joined, f: first, g: era.epoch, gen: era.generation });
}

/** The era a token's ticket belongs to, to carry it unchanged into a renewed cookie. */
function tokenEra(token: TokenClaims): Era {
  return { epoch: token.g ?? 0, generation: token.gen ?? 0 };
}

/**
 * A visitor let in now: its access token, which always carries when the session began (`s`), so
 * session_max_seconds holds in every mode (`slot`: it also holds a capacity slot, so it carries
 * when the slot was last refreshed in the store, `r`, now), and what the signed admission says of
 * it (its grant, bound to the same session).
 */
async function admittedVisit(
  ctx: HandlerContext,
  ticket: number,
  joined: number,
  nowMs: number,
  slot: boolean,
  generation: number,
  walkIn = false,
): Promise<Extract<Visit, { kind: 'admitted' }>> {
  const now = Math.floor(nowMs / 1000);
  const v = walkIn ? (1 as const) : undefined;
  const cookie = await ctx.issue('a', ticket, nowMs, slot ? { j: joined, s: now, r: now, gen: generation, v } : { j: joined, s: now, gen: generation, v });
  const grant = accessGrant(walkIn ? 'walk-in' : 'queue', ticket, now, ctx.expiryOf('a', nowMs, { s: now }));
  return { kind: 'admitted', ticket, slot, cookie, grant };
}

/** How the holder of an access token got in: a VIP code (ticket 0), walking in, or its call in the queue. */
function viaOf(token: Pick<TokenClaims, 't' | 'v'>): AdmissionVia {
  return token.t === 0 ? 'vip' : token.v === 1 ? 'walk-in' : 'queue';
}

/** What the signed admission says of an admitted visitor (see admission.ts): bound to its ticket and session start. */
export function accessGrant(via: AdmissionVia, ticket: number, start: number, sessionExpires: number): Grant {
  return { via, ticket, admittedAt: start, sessionExpires, binding: `${ticket}|${start}` };
}

/**
 * A called place claims its admission (one call, never cached): in capacity mode its slot; in rate
 * mode its arrival, so that the store hands the call of a ticket nobody takes up in time to the
 * next one. The store knows the visitor by its place (`place`, which is its ticket unless an
 * event's pre-queue was shuffled); the waiting cookie keeps the arrival ticket.
 */
export async function claimSlot(ctx: HandlerContext, trace: Trace, ticket: number, place: number, joined: number, nowMs: number, state: QueueState): Promise<Visit> {
  const { store, queue, policyNow, storeCall } = ctx;
  const slot = isCapacityMode(state);
  // The ticket belongs to the state's generation (the caller checked the token against it): a
  // store that lost its state since then refuses the number, which may be someone else's now.
  const claimed = await storeCall(trace, () => store.claim(queue, place, nowMs, policyNow(), Math.max(0, nowMs - joined * 1000), state.generation));
  if (!claimed.ok) {
    // Rate mode: the state said this place was called, and a rate-mode admission needs nothing
    // from the store afterwards; only the count of the arrival is lost (its call lapses and is
    // handed on, one admission more than the rate).
    if (!slot) {
      trace.reason = 'claim_unrecorded';
      return admittedVisit(ctx, place, joined, nowMs, false, state.generation);
    }
    return { kind: 'unavailable', ticket, cookie: await waitingCookie(ctx, ticket, joined, nowMs, undefined, state) };
  }
  observeState(ctx.blockScope, claimed.value);
  record(trace, claimed.value, place);
  if (claimed.value.claimed) {
    // The mode the claim ran under, should the thresholds have changed since the cached state.
    const held = isCapacityMode(claimed.value);
    return admittedVisit(ctx, place, joined, nowMs, held, claimed.value.generation);
  }
  if (isForeign(state.generation, claimed.value)) {
    trace.reason = 'ticket_from_lost_state';
    return newVisit(ctx, trace, nowMs, true);
  }
  trace.reason = 'called_no_room';
  const cookie = await waitingCookie(ctx, ticket, joined, nowMs, 1, state);
  return { kind: 'waiting', ticket, ahead: 0, front: true, draw: false, first: 1, state, cookie };
}

/**
 * Where a ticket's place is. Without a shuffled event it is the ticket; with one, the pre-queue's
 * tickets 1..eventSize are permuted by the seed frozen at the start (every POP computes the same
 * places from the cached state), and later tickets keep their number.
 */
export function placeOf(ctx: HandlerContext, ticket: number, state: QueueState): number {
  const { shuffled } = ctx;
  if (!shuffled || ticket > state.eventSize) return ticket;
  return createShuffle(state.eventSize, state.eventSeed).place(ticket);
}

/** FIFO: where a ticket stands against a state: called (rate or capacity mode) or still waiting. */
export async function settle(ctx: HandlerContext, trace: Trace, state: QueueState, ticket: number, joined: number, first: number | undefined, nowMs: number): Promise<Visit> {
  const { config, shuffled } = ctx;
  // A cached state from just before the start has no frozen pre-queue yet: places are being drawn.
  if (shuffled && state.eventSize === 0 && state.cursor === 0 && joined * 1000 < config.eventStartMs) {
    trace.ticket = ticket;
    trace.reason = 'drawing_places';
    return { kind: 'prequeue', ticket, cookie: await waitingCookie(ctx, ticket, joined, nowMs, undefined, state) };
  }
  const place = placeOf(ctx, ticket, state);
  record(trace, state, place);
  if (place > state.cursor) {
    // Reported holes between the cursor and the place are nobody's: not people ahead.
    const ahead = peopleAhead(state, place);
    // The progress bar starts at the first place shown; a shuffle at the start may move it back.
    const start = first === undefined || first < ahead + 1 ? ahead + 1 : first;
    const cookie = await waitingCookie(ctx, ticket, joined, nowMs, start, state);
    return { kind: 'waiting', ticket, ahead, front: false, draw: false, first: start, state, cookie };
  }
  if (state.switch === 'hold') {
    // Switched to hold: called, but nobody new gets in; the visitor waits at the front, no claim.
    trace.reason = 'switch_hold';
    const cookie = await waitingCookie(ctx, ticket, joined, nowMs, 1, state);
    return { kind: 'waiting', ticket, ahead: 0, front: true, draw: false, first: 1, state, cookie };
  }
  return claimSlot(ctx, trace, ticket, place, joined, nowMs, state);
}

/**
 * A new ticket. `lostState`: the visitor's token was of a lost generation, which tells the store
 * its state was lost: capacity mode then holds new admissions for one activity refresh interval
 * (see `recoverMs`), while the lost state's holders register their slots again.
 */
export async function newVisit(ctx: HandlerContext, trace: Trace, nowMs: number, lostState = false, pendingKey?: string): Promise<Visit> {
  const { config, queue } = ctx;
  // Switched open, as this POP last saw the state: the room steps aside, no check, no store call.
  const seen = await cachedState(ctx);
  if (seen?.switch === 'open') {
    trace.reason = 'switch_open';
    return { kind: 'open' };
  }
  // A join asked again with its key passed the checks the first time (its cookie is ours, signed
  // after them) and gets the same ticket: it is not checked again (a spent proof would fail).
  const checked = pendingKey === undefined;
  // The visitor keeps the key, so its next request asks for the same ticket (see JoinOptions.joinKey).
  const pending = async (key: string): Promise<Visit> => ({ kind: 'unavailable', ticket: undefined, cookie: await ctx.issue('w', 0, nowMs, { p: key }) });
  // A join asked again (the visitor's page retries every refresh) while this POP remembers the store
  // failing is answered from that, as a poll is, before it is counted or checked: the visitors who
  // arrived during an outage must not bring a call each per retry to a store that fails fast. A
  // first join still asks: that is an arrival.
  if (pendingKey !== undefined) {
    const failed = await rememberedFailure(ctx);
    if (failed !== undefined) {
      await answeredFromFailure(ctx, trace, failed);
      return pending(pendingKey);
    }
  }
  // A proof of work first, when the queue asks for one: a request without a valid solution gets a
  // challenge, is not counted for the ticket limit, and costs no store call.
  if (config.powDifficulty > 0 && checked) {
    const proof = await checkSolution(ctx.secrets.keyRing, config, spentOnce(ctx.cache, queue), trace.proof, trace.from, nowMs);
    if (!proof.ok) {
      trace.reason = proof.reason;
      const missing = proof.reason === 'pow_missing';
      await countRefusal(ctx.deps.ticketLimiter, config.queueName, missing ? 'proof_missing' : 'proof_failed');
      if (!missing && config.failedProof === 'shadow') return enterShadow(ctx, trace, nowMs);
      return { kind: 'challenge', pow: await issueChallenge(ctx.secrets.keyRing, config, trace.from, nowMs) };
    }
  }
  // The challenge hook's widget next: without a token, no ticket and no call to the provider.
  const hooked = config.challengeProvider !== 'none' && checked;
  if (hooked && (trace.challenge === undefined || trace.challenge === '')) {
    trace.reason = 'challenge_missing';
    await countRefusal(ctx.deps.ticketLimiter, config.queueName, 'challenge_missing');
    return { kind: 'challenge', hook: challengeHook(config) };
  }
  // One client must not take the crowd's tickets: counted before the store is asked (no store call),
  // and before the provider is asked, so a flood of forged tokens is not a flood of siteverify calls.
  const allowance = await allowNewTicket(ctx.deps.ticketLimiter, config, trace.from, trace);
  if (!allowance.ok) return { kind: 'limited', retryAfterSeconds: allowance.retryAfterSeconds, why: 'ticket_limit' };
  if (hooked) {
    const gate = await passChallenge(ctx, trace, nowMs);
    if (gate !== undefined) return gate;
  }
  // Ticket blocks: while this POP last saw a line, the next number of a block this instance took is
  // handed out here without a store call (see edge-blocks.ts). Not while nobody waits: a walk-in
  // is decided at its join, and a handed number would wait for a call a join gives at once. A
  // retried join (its key) and a cookie of a lost state go to the store, which must hear of them.
  // An arrival that finds no number while this instance has a block join under way waits for it;
  // one that finds none under way leads the join the next arrivals wait for.
  const blocks = blocksOf(ctx.blockScope);
  const line = seen !== undefined && seen.tail > seen.cursor;
  let lead: BlockJoin | undefined;
  if (blocks !== undefined && line && pendingKey === undefined && !lostState) {
    const handed = await handOut(ctx, trace, blocks, seen, nowMs);
    if (handed.visit !== undefined) return handed.visit;
    lead = handed.lead;
  }
  try {
    return await joinStore(ctx, trace, nowMs, lostState, pendingKey, seen, blocks, line, lead, pending);
  } finally {
    // Whatever happened, those waiting for this join must not wait for an answer that never comes.
    lead?.settle(undefined);
  }
}

/** The store join of a new visitor (newVisit's second half), and what the visitor gets from it. */
async function joinStore(
  ctx: HandlerContext,
  trace: Trace,
  nowMs: number,
  lostState: boolean,
  pendingKey: string | undefined,
  seen: QueueState | undefined,
  blocks: TicketBlocks | undefined,
  line: boolean,
  lead: BlockJoin | undefined,
  pending: (key: string) => Promise<Visit>,
): Promise<Visit> {
  const { config, store, queue, random, recoverMs, storeCall } = ctx;
  // What this POP last saw of the state (its cache, no store call): a ticket at or below that tail
  // in that generation means the store was rolled back (see QueueStore.join's floor).
  const floor = seen !== undefined && seen.generation > 0 ? { tail: seen.tail, generation: seen.generation } : undefined;
  // Without a cookie of a lost state, a POP that served this queue (it holds a state, or its
  // marker says a join was answered here) still knows a state the store finds absent or rolled
  // back was lost: with the pop sign the store then holds capacity admissions from this very join
  // on, so newcomers cannot fill the room of holders who have not refreshed yet. A cookie of the
  // lost state opens the window whatever the store finds.
  const popSign = !lostState && config.lostStateSign === 'pop';
  const marked = popSign && floor === undefined && (await servedThisQueue(ctx));
  const servedBefore = popSign && (floor !== undefined || marked);
  // The join's key: the one of this visitor's join that got no answer (the store may have taken a
  // ticket for it all the same, and then gives that one again), else 64 new random bits.
  const joinKey = pendingKey ?? randomHex(8);
  // With blocks, the join takes as many numbers as the recent arrivals here would use up in a
  // moment (one while nobody waits) and reports the numbers of expired blocks nobody will hold.
  const asked = blocks?.joinOptions(ctx.clock.now());
  const block = asked === undefined ? undefined : { size: line ? asked.size : 1, holes: asked.holes };
  // A join of one number brings none to share: those waiting for it join themselves at once.
  if (block === undefined || block.size < 2) lead?.settle(undefined);
  const options: JoinOptions = { recoverMs: lostState || servedBefore ? recoverMs : undefined, recoverIfNew: servedBefore, floor, joinKey, ...(block !== undefined && { block }) };
  // This instance's refusals and store errors ride on the join's write (see edge-tally.ts); given
  // back when the join fails or takes no ticket.
  const tally = takeTally(queue);
  // A block's age counts from here: the store runs the join after it was sent.
  const sentAtMs = ctx.clock.now();
  const joined = await storeCall(trace, () => store.join(queue, nowMs, tally === undefined ? ctx.statePolicy() : { ...ctx.statePolicy(), tally }, options));
  if (!joined.ok || joined.value.replayed || joined.value.ticket === 0) returnTally(queue, tally);
  if (!joined.ok) {
    blocks?.failed(block?.holes);
    lead?.settle(undefined);
    await rememberFailure(ctx, joined);
    return pending(joinKey);
  }
  if (blocks !== undefined && block !== undefined) await tookBlock(ctx, trace, blocks, joined.value, block, sentAtMs, lead);
  if (config.lostStateSign === 'pop' && !marked) await markServed(ctx);
  // The ticket is taken: the response clears the solution and the token the request carries (spent
  // on this join or on the first try of it), which would count as replays on a later new ticket.
  const spent = [...(trace.proof !== undefined ? [powCookieName(config)] : []), ...(trace.challenge !== undefined ? [challengeCookieName(config)] : [])];
  if (spent.length > 0) trace.spent = spent;
  const result = joined.value;
  if (result.switch === 'open') {
    // Switched open since this POP last looked: the store took no ticket.
    trace.reason = 'switch_open';
    return { kind: 'open' };
  }
  if (result.replayed) trace.reason = 'join_replayed';
  const now = Math.floor(nowMs / 1000);
  if (result.claimed) {
    record(trace, result, result.ticket);
    trace.reason = result.replayed ? 'walk_in_replayed' : 'walk_in';
    const slot = isCapacityMode(result);
    return admittedVisit(ctx, result.ticket, now, nowMs, slot, result.generation, true);
  }
  if (eventPhase(config, nowMs) === 'before') {
    record(trace, result, result.ticket);
    return { kind: 'prequeue', ticket: result.ticket, cookie: await waitingCookie(ctx, result.ticket, now, nowMs, undefined, result) };
  }
  if (random) return drawn(ctx, trace, result, 'waiting', result.ticket, now, nowMs);
  if (isCapacityMode(result) && result.ticket <= result.cursor) {
    // Called by the same step but not claimed (paused meanwhile): it claims on the next poll.
    record(trace, result, result.ticket);
    const cookie = await waitingCookie(ctx, result.ticket, now, nowMs, 1, result);
    return { kind: 'waiting', ticket: result.ticket, ahead: 0, front: true, draw: false, first: 1, state: result, cookie };
  }
  return settle(ctx, trace, result, result.ticket, now, undefined, nowMs);
}

/** An arrival waits for at most this many joins of others before it joins itself: a bound on its wait under a steady stream. */
const MAX_JOIN_WAITS = 4;

/**
 * A number of a block this instance took, handed to a new visitor without a store call. Without a
 * live block, the arrival waits for the block join this instance has under way and takes its
 * number from the block it brings; with none under way (or after MAX_JOIN_WAITS, or when the join
 * failed or took one number) `visit` is undefined: the caller joins, leading the join others wait
 * for when `lead` is set. Nothing awaits between finding no number and registering the lead, so
 * arrivals right behind wait for it rather than join alongside.
 */
async function handOut(ctx: HandlerContext, trace: Trace, blocks: TicketBlocks, seen: QueueState, nowMs: number): Promise<{ visit?: Visit; lead?: BlockJoin }> {
  let state = seen;
  for (let waits = 0; ; waits++) {
    const handed = blocks.next(ctx.clock.now(), waits > 0);
    if (handed !== undefined) {
      const visit = await answerHanded(ctx, trace, blocks, handed, state, nowMs);
      return visit !== undefined ? { visit } : { lead: leadJoin(ctx.blockScope) };
    }
    const underway = joinUnderWay(ctx.blockScope);
    if (underway === undefined || waits >= MAX_JOIN_WAITS) return { lead: leadJoin(ctx.blockScope) };
    const answer = await underway.answered;
    if (answer === undefined) return { lead: leadJoin(ctx.blockScope) };
    // The store's fresh answer: what the numbers its block brought are answered from.
    state = answer;
  }
}

/**
 * The page for a handed number, answered from the state this POP has cached (or the join this
 * arrival waited for), as a poll's cache hit is; undefined when the number is void (the caller
 * joins). A state of another epoch or generation than the block's is from before a reset or a
 * loss, or the block is: the store settles which (one poll, rare).
 */
async function answerHanded(ctx: HandlerContext, trace: Trace, blocks: TicketBlocks, handed: HandedTicket, seen: QueueState, nowMs: number): Promise<Visit | undefined> {
  const { config, store, queue, storeCall } = ctx;
  const now = Math.floor(nowMs / 1000);
  let state = seen;
  if (!sameLife(handed, state)) {
    const polled = await storeCall(trace, () => store.poll(queue, nowMs, ctx.statePolicy()));
    if (!polled.ok) {
      // The ticket is the visitor's whatever the store says later: kept, as a waiting poll's is.
      trace.ticket = handed.ticket;
      trace.block = 'handed';
      return { kind: 'unavailable', ticket: handed.ticket, cookie: await waitingCookie(ctx, handed.ticket, now, nowMs, undefined, handed) };
    }
    state = polled.value;
    blocks.observe(state.epoch, state.generation);
    await keepState(ctx, state);
    // The block was of a life that is over: its numbers are void, and the visitor joins.
    if (!sameLife(handed, state)) return undefined;
  }
  trace.block = 'handed';
  if (state.switch === 'open') {
    trace.reason = 'switch_open';
    return { kind: 'open' };
  }
  if (eventPhase(config, nowMs) === 'before') {
    record(trace, state, handed.ticket);
    return { kind: 'prequeue', ticket: handed.ticket, cookie: await waitingCookie(ctx, handed.ticket, now, nowMs, undefined, state) };
  }
  return settle(ctx, trace, state, handed.ticket, now, undefined, nowMs);
}

function sameLife(a: Era, b: Era): boolean {
  return a.epoch === b.epoch && a.generation === b.generation;
}

/**
 * A block join's answer: the rest of its block is this instance's to hand out, the POP's cache
 * keeps its state (the next arrivals are answered from it, and see the line), and the log line
 * says what was taken and reported.
 */
async function tookBlock(ctx: HandlerContext, trace: Trace, blocks: TicketBlocks, result: JoinResult, asked: NonNullable<JoinOptions['block']>, sentAtMs: number, lead: BlockJoin | undefined): Promise<void> {
  blocks.accept(result, sentAtMs);
  // The block is in the allocator: those waiting for this join take their numbers from it, in the
  // order they came to wait (promise reactions run in the order they were registered). A join that
  // brought none to share (a walk-in, a replay, the switch open) sends them to join themselves.
  const shared = result.block !== undefined && result.block.to > result.ticket && !result.replayed;
  lead?.settle(shared ? result : undefined);
  const taken = result.block !== undefined && result.block.to > result.block.from ? `took ${result.block.from}-${result.block.to}` : undefined;
  const holes = asked.holes === undefined ? 0 : asked.holes.ranges.reduce((n, r) => n + r.to - r.from + 1, 0);
  const said = [...(taken === undefined ? [] : [taken]), ...(holes > 0 ? [`reported ${holes} holes`] : [])].join(', ');
  if (said !== '') trace.block = said;
  await keepState(ctx, result);
}

/** Puts a state the store just answered in this POP's cache (not when the cache is off, or fails). */
async function keepState(ctx: HandlerContext, state: QueueState): Promise<void> {
  if (ctx.config.stateCacheSeconds === 0) return;
  const { ticket: _t, claimed: _c, replayed: _r, block: _b, ...rest } = state as Partial<JoinResult> & QueueState;
  await ctx.cache.put(ctx.cacheKey, rest as QueueState, ctx.config.stateCacheSeconds).catch(() => undefined);
}

/** How long a visitor waits for another try while the challenge provider is down (`hold`), seconds. */
export const CHALLENGE_RETRY_SECONDS = 10;

/**
 * Asks the challenge provider about the token the request carries (see challenge.ts): undefined
 * when it passed (or the provider is down and `challenge_unavailable = pass`), else what the
 * visitor gets instead of a ticket. A refusal is counted for the console.
 */
async function passChallenge(ctx: HandlerContext, trace: Trace, nowMs: number): Promise<Visit | undefined> {
  const { config, secrets, deps } = ctx;
  let secret: string | undefined;
  try {
    secret = await secrets.challengeSecret();
  } catch (error) {
    secret = undefined;
    trace.reason = `challenge secret unreadable: ${describeError(error)}`;
  }
  const verdict =
    deps.siteVerifier === undefined
      ? ({ kind: 'down', reason: 'challenge_down: this host has no way to reach a challenge provider' } as const)
      : await verifyChallenge(deps.siteVerifier, config, secret, trace.challenge ?? '', trace.from, trace.host ?? '');
  if (verdict.kind === 'passed') return undefined;
  trace.reason = verdict.reason;
  if (verdict.kind === 'down') {
    if (config.challengeUnavailable === 'pass') {
      trace.reason = `${verdict.reason}; let through unchecked (challenge_unavailable = pass)`;
      return undefined;
    }
    return { kind: 'limited', retryAfterSeconds: CHALLENGE_RETRY_SECONDS, why: 'challenge_down' };
  }
  await countRefusal(deps.ticketLimiter, config.queueName, verdict.kind === 'failed' ? 'challenge_failed' : 'challenge_missing');
  // A stale token (expired, or used for a ticket before) is a person's page left open: a new check.
  if (verdict.kind === 'failed' && config.failedProof === 'shadow') return enterShadow(ctx, trace, nowMs);
  return { kind: 'challenge', hook: challengeHook(config) };
}

/**
 * The shadow queue ("infinite queue", `failed_proof = shadow`): a visitor whose proof of work failed
 * gets what looks like a place in line, behind the real queue as this POP last saw it, and a
 * cookie that keeps it there. It holds no ticket in the store, its place never moves, and it is
 * never admitted; nothing tells it apart from a real wait but time.
 */
async function enterShadow(ctx: HandlerContext, trace: Trace, nowMs: number): Promise<Visit> {
  const seen = await cachedState(ctx);
  const spread = ctx.randomSeed() % 200;
  const ahead = (seen === undefined ? 0 : waitingOf(seen, false)) + 40 + spread;
  const ticket = (seen?.tail ?? 0) + 41 + spread;
  trace.reason = `${trace.reason ?? 'pow_failed'}; shadow queue`;
  return shadowVisit(ctx, trace, ticket, ahead, Math.floor(nowMs / 1000), nowMs);
}

/** A shadow ticket's visit: always waiting, `ahead` others in front, no store call. */
async function shadowVisit(ctx: HandlerContext, trace: Trace, ticket: number, ahead: number, joined: number, nowMs: number): Promise<Visit> {
  trace.ticket = ticket;
  const state: QueueState = {
    tail: ticket,
    cursor: ticket - ahead - 1,
    paused: false,
    maxActive: 0,
    maxNewPerMinute: 0,
    active: 0,
    admittedLastMinute: 0,
    admittedLast5Minutes: 0,
    eventSize: 0,
    eventSeed: 0,
    waiting: 0,
    epoch: 0,
    generation: 0,
  };
  const cookie = await ctx.issue('w', ticket, nowMs, { j: joined, f: ahead + 1, x: 1 });
  return { kind: 'waiting', ticket, ahead, front: false, draw: false, first: ahead + 1, state, cookie };
}

/** How long a POP remembers that it served a queue (see servedThisQueue), seconds. */
export const SERVED_MEMORY_SECONDS = 6 * 3600;

/** The queue state in this POP's cache while it is fresh, without loading it (no store call). */
async function cachedState(ctx: HandlerContext): Promise<QueueState | undefined> {
  if (ctx.config.stateCacheSeconds === 0) return undefined;
  try {
    return await ctx.cache.peek<QueueState>(ctx.cacheKey);
  } catch {
    return undefined;
  }
}

/**
 * Whether this POP served the queue (a store answer to one of its joins) within
 * SERVED_MEMORY_SECONDS: a marker in the POP's cache, one cache call and no store call. Looking
 * does not mark (concurrent first joins must not take each other for earlier service); a cache
 * that fails says no, and the recovery then waits for a cookie of the lost state.
 */
async function servedThisQueue(ctx: HandlerContext): Promise<boolean> {
  try {
    return (await ctx.cache.peek<boolean>(`${ctx.cacheKey}:served`)) === true;
  } catch {
    return false;
  }
}

/** Marks this POP as having served the queue, after a join the store answered. */
async function markServed(ctx: HandlerContext): Promise<void> {
  try {
    await ctx.cache.getOrLoad(`${ctx.cacheKey}:served`, SERVED_MEMORY_SECONDS, async () => true);
  } catch {
    // A cache that fails marks nothing: the cookie of a lost state still tells the store.
  }
}

/** The random method: what a draw said about a ticket still waiting, or called without room. */
async function drawn(ctx: HandlerContext, trace: Trace, state: QueueState, outcome: 'waiting' | 'front', ticket: number, joined: number, nowMs: number): Promise<Visit> {
  const { config } = ctx;
  record(trace, state, ticket);
  const cookie = await waitingCookie(ctx, ticket, joined, nowMs, undefined, state);
  if (eventPhase(config, nowMs) === 'before') return { kind: 'prequeue', ticket, cookie };
  const front = outcome === 'front';
  return { kind: 'waiting', ticket, ahead: front ? 0 : Math.max(0, state.waiting - 1), front, draw: !front, first: 1, state, cookie };
}

/** The longest a random-method ticket is answered from its last draw (see drawGateSeconds), seconds. */
export const DRAW_GATE_MAX_SECONDS = 5;

/**
 * The random method: how long a ticket's last draw answer (still waiting) stands at this POP, in
 * whole seconds; 0 with the per-POP cache off (`state_cache_seconds = 0`): every poll is a draw.
 * At most half of `refresh_seconds`, so a page polling at its interval always reaches the store
 * (renewing its presence, learning of its draw); only polls faster than that are answered from
 * the cache. At most DRAW_GATE_MAX_SECONDS, under `state_cache_seconds` + 5 s: a ticket drawn just
 * after an answer was kept still polls the store before its reservation (`refresh_seconds` +
 * `state_cache_seconds` + 5 s) lapses, even when one of its polls came early and was answered
 * from the cache. Presence lasts 2 × `refresh_seconds` + 5 s, well beyond it.
 */
export function drawGateSeconds(config: Pick<HandlerContext['config'], 'stateCacheSeconds' | 'refreshSeconds'>): number {
  if (config.stateCacheSeconds === 0) return 0;
  return Math.min(DRAW_GATE_MAX_SECONDS, Math.max(1, Math.floor(config.refreshSeconds / 2)));
}

/** A draw answer that is not kept in the cache (a failure, or anything but "still waiting"): every waiter gets it as it is. */
class UncachedDraw extends Error {
  constructor(readonly outcome: StoreOutcome<DrawResult>) {
    super('draw answer not cached');
  }
}

/** Whether a draw answer says the token's ticket is still waiting in the draw, in the token's era. */
function stillWaiting(token: TokenClaims, r: DrawResult): boolean {
  return r.switch !== 'open' && r.outcome === 'waiting' && (token.g ?? 0) === r.epoch && !isForeign(token.gen, r);
}

/**
 * One poll's draw: a store call, unless the same ticket (in the same epoch and generation) was
 * answered "still waiting" at this POP within drawGateSeconds, whose answer then stands. A faster
 * poll never improves a ticket's chances (the draw picks among present tickets, whatever their
 * polls), so answering it from the cache takes nothing from it; concurrent polls of one ticket
 * share one call. A cache entry per ticket is a cache call, not a store command.
 */
async function drawOnce(ctx: HandlerContext, trace: Trace, token: TokenClaims, joined: number, nowMs: number): Promise<StoreOutcome<DrawResult>> {
  const { config, store, queue, cache, cacheKey, policyNow, storeCall } = ctx;
  const direct = () => storeCall(trace, () => store.draw(queue, token.t, nowMs, policyNow(), Math.max(0, nowMs - joined * 1000), token.gen));
  const gate = drawGateSeconds(config);
  if (gate === 0) return direct();
  try {
    const key = `${cacheKey}:draw:${token.gen ?? 0}:${token.g ?? 0}:${token.t}`;
    const { value, hit } = await cache.getOrLoad(key, gate, async () => {
      const outcome = await direct();
      if (!outcome.ok || !stillWaiting(token, outcome.value)) throw new UncachedDraw(outcome);
      return outcome.value;
    });
    trace.cache = hit ? 'hit' : 'miss';
    return { ok: true, value, ms: trace.storeMs ?? 0 };
  } catch (error) {
    if (error instanceof UncachedDraw) return error.outcome;
    // The cache itself failed: the store still answers, one call per poll.
    trace.reason = `cache: ${describeError(error)}`;
    return direct();
  }
}

/**
 * The random method: a waiting poll is one store call (`draw`, see drawOnce for the polls that
 * are not), which keeps the visitor in the draw and tells whether it was drawn. A ticket the draw
 * no longer knows (its presence lapsed, or the queue was reset) gets a new one: in a lottery that
 * costs the visitor nothing.
 */
export async function drawVisit(ctx: HandlerContext, trace: Trace, token: TokenClaims, joined: number, nowMs: number, takeTicket: boolean): Promise<Visit> {
  const result = await drawOnce(ctx, trace, token, joined, nowMs);
  if (!result.ok) {
    trace.ticket = token.t;
    return { kind: 'unavailable', ticket: token.t, cookie: await waitingCookie(ctx, token.t, joined, nowMs, undefined, tokenEra(token)) };
  }
  const r = result.value;
  if (r.switch === 'open') {
    trace.reason = 'switch_open';
    return { kind: 'open' };
  }
  if (r.outcome === 'unknown' || (token.g ?? 0) !== r.epoch || isForeign(token.gen, r)) {
    trace.reason = isForeign(token.gen, r) ? 'ticket_from_lost_state' : 'not_in_draw';
    return takeTicket ? newVisit(ctx, trace, nowMs, isForeign(token.gen, r)) : { kind: 'none' };
  }
  if (r.outcome === 'drawn') {
    record(trace, r, token.t);
    return admittedVisit(ctx, token.t, joined, nowMs, r.claimed, r.generation);
  }
  return drawn(ctx, trace, r, r.outcome, token.t, joined, nowMs);
}

export async function accessVisit(ctx: HandlerContext, trace: Trace, token: TokenClaims, nowMs: number, takeTicket: boolean): Promise<Visit> {
  const { config, store, queue, basePolicy, renewAfterMs, refreshAfterMs, storeCall, issue } = ctx;
  trace.ticket = token.t;
  // A token without `s` was issued at its admission (a VIP link, or one from before `s` was
  // carried in rate mode): its session began when it was issued, and renewals carry that on.
  const start = sessionStart(token);
  const untilMs = config.sessionMaxSeconds > 0 ? (start + config.sessionMaxSeconds) * 1000 : Number.MAX_SAFE_INTEGER;
  if (nowMs >= untilMs) {
    // The token's expiry is capped at the maximum already; this also ends sessions when the
    // maximum was lowered after the token was issued.
    trace.reason = 'session_max';
    return takeTicket ? newVisit(ctx, trace, nowMs) : { kind: 'none' };
  }
  const via = viaOf(token);
  const v = token.v === 1 ? (1 as const) : undefined;
  const renewedGrant = () => accessGrant(via, token.t, start, ctx.expiryOf('a', nowMs, { s: start }));
  const keptGrant = accessGrant(via, token.t, start, token.exp);
  if (!holdsSlot(token)) {
    const renew = nowMs - token.iat * 1000 >= renewAfterMs;
    if (!renew) return { kind: 'access', ticket: token.t, slot: false, cookie: undefined, grant: keptGrant };
    return { kind: 'access', ticket: token.t, slot: false, cookie: await issue('a', token.t, nowMs, { j: token.j, s: start, gen: token.gen, v }), grant: renewedGrant() };
  }
  // Capacity mode: the slot is refreshed in the store at most once per activity_refresh_seconds.
  const lastRefreshMs = (token.r ?? start) * 1000;
  const generation = token.gen;
  if (nowMs - lastRefreshMs < refreshAfterMs) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined, generation, grant: keptGrant };
  // A holder from a lost generation keeps its generation: the store registers its slot again
  // under a member of its own (see scripts.ts, Generations) and renews that one from then on.
  const touched = await storeCall(trace, () => store.touch(queue, token.t, nowMs, basePolicy, untilMs, generation));
  // The token is self-contained: a store that does not answer does not end the session.
  if (!touched.ok) return { kind: 'access', ticket: token.t, slot: true, cookie: undefined, generation, grant: keptGrant };
  if (!touched.value) {
    trace.reason = 'slot_ended';
    return takeTicket ? newVisit(ctx, trace, nowMs) : { kind: 'none' };
  }
  const now = Math.floor(nowMs / 1000);
  return {
    kind: 'access',
    ticket: token.t,
    slot: true,
    cookie: await issue('a', token.t, nowMs, { j: token.j, s: start, r: now, gen: generation, v }),
    generation,
    grant: renewedGrant(),
  };
}

/**
 * The context of the visitor a token is about: with several databases, the token's (`sh`), or for
 * a visitor without one, the database a new ticket goes to (see withShard).
 */
function visitorContext(ctx: HandlerContext, token: TokenClaims | undefined): HandlerContext {
  if (ctx.config.storeShards <= 1) return ctx;
  return withShard(ctx, token === undefined ? shardForNewVisitor(ctx) : (token.sh ?? 0));
}

/** Steps 4 and 5 of the request path: the cookie, then what the store must say. */
export async function visit(ctx: HandlerContext, request: Request, trace: Trace, takeTicket: boolean): Promise<Visit> {
  const nowMs = ctx.clock.now();
  const { config } = ctx;
  if (config.powDifficulty > 0 && takeTicket) trace.proof = readCookieValues(request.headers.get('cookie'), powCookieName(config))[0];
  if (config.challengeProvider !== 'none' && takeTicket) {
    trace.challenge = readCookieValues(request.headers.get('cookie'), challengeCookieName(config))[0];
    trace.host = new URL(request.url).hostname;
  }
  const token = await readToken(ctx, request, nowMs, trace);
  const own = visitorContext(ctx, token);
  const v = await visitWith(own, trace, takeTicket, token, nowMs);
  // Whatever the origin's answer does with the session (end_session_header) goes to the same database.
  return own.shard !== undefined && (v.kind === 'access' || v.kind === 'admitted') ? { ...v, shard: own.shard } : v;
}

async function visitWith(ctx: HandlerContext, trace: Trace, takeTicket: boolean, token: TokenClaims | undefined, nowMs: number): Promise<Visit> {
  const { config, random } = ctx;
  if (token?.k === 'a') return accessVisit(ctx, trace, token, nowMs, takeTicket);
  if (token?.x === 1) {
    // The shadow queue: the same place, for ever (see enterShadow).
    trace.reason = 'shadow queue';
    return shadowVisit(ctx, trace, token.t, Math.max(0, (token.f ?? 1) - 1), token.j ?? token.iat, nowMs);
  }
  if (token?.p !== undefined) {
    // A join that got no answer: this one asks again with its key.
    if (!takeTicket) return { kind: 'none' };
    trace.reason = 'join_retried';
    return newVisit(ctx, trace, nowMs, false, token.p);
  }
  if (token !== undefined) {
    const joined = token.j ?? token.iat;
    if (random) return drawVisit(ctx, trace, token, joined, nowMs, takeTicket);
    if (eventPhase(config, nowMs) === 'before') {
      // Nothing moves before the start: the pre-queue page needs no store call.
      trace.ticket = token.t;
      return { kind: 'prequeue', ticket: token.t, cookie: await waitingCookie(ctx, token.t, joined, nowMs, undefined, tokenEra(token)) };
    }
    let polled = await pollState(ctx, trace, nowMs);
    // Another era than the POP's cached state: the cache may be the older one; the store says.
    if (polled.ok && trace.cache === 'hit' && !ofEra(token, polled.value)) polled = await recheckEra(ctx, trace, nowMs);
    if (!polled.ok) {
      trace.ticket = token.t;
      // The outage is not the visitor's fault: keep the ticket alive while it lasts.
      return { kind: 'unavailable', ticket: token.t, cookie: await waitingCookie(ctx, token.t, joined, nowMs, token.f, tokenEra(token)) };
    }
    if (polled.value.switch === 'open') {
      trace.ticket = token.t;
      trace.reason = 'switch_open';
      return { kind: 'open' };
    }
    if (isForeign(token.gen, polled.value)) {
      // The store lost its state since this ticket was taken: numbers restarted, so this one may
      // be a newer visitor's. The visitor rejoins at the back (see docs/architecture.md, "When the store
      // loses its state"). Checked before the epoch, which the loss reset too.
      trace.reason = 'ticket_from_lost_state';
      return takeTicket ? newVisit(ctx, trace, nowMs, true) : { kind: 'none' };
    }
    if ((token.g ?? 0) !== polled.value.epoch) {
      // The queue was reset since this ticket was taken: it stands for nothing any more.
      trace.reason = 'ticket_before_reset';
      return takeTicket ? newVisit(ctx, trace, nowMs) : { kind: 'none' };
    }
    return settle(ctx, trace, polled.value, token.t, joined, token.f, nowMs);
  }
  if (!takeTicket) return { kind: 'none' };
  return newVisit(ctx, trace, nowMs);
}

/** Whether a ticket belongs to a state's era: its generation (isForeign's rule) and its reset epoch. */
function ofEra(token: TokenClaims, state: QueueState): boolean {
  return !isForeign(token.gen, state) && (token.g ?? 0) === state.epoch;
}

/**
 * A ticket of another era than the state this POP cached. The cache may be the older of the two: a
 * ticket another POP or instance took after a reset or a lost state that this cache, up to a
 * lifetime old, has not seen yet (with several databases, after one of them was flushed); judged
 * on it, the ticket would look lost and its holder would be sent to the back. Only the store can
 * say, and its answer replaces the cached state. Asked at most once per cache lifetime at this
 * POP, whatever the number of such tickets, so a lost generation's tickets coming back, or one
 * replayed in a flood, cost no more than a cache miss; a failure is the store's outage as a poll's.
 */
async function recheckEra(ctx: HandlerContext, trace: Trace, nowMs: number): Promise<StoreOutcome<QueueState>> {
  const { config, store, cache, queue, cacheKey, storeCall } = ctx;
  try {
    const { value } = await cache.getOrLoad(`${cacheKey}:era`, config.stateCacheSeconds, async () => {
      const outcome = await storeCall(trace, () => store.poll(queue, nowMs, ctx.statePolicy()));
      if (!outcome.ok) throw new StoreUnavailable(outcome);
      observeState(ctx.blockScope, outcome.value);
      await keepState(ctx, outcome.value);
      return outcome.value;
    });
    trace.reason = 'era_rechecked';
    return { ok: true, value, ms: trace.storeMs ?? 0 };
  } catch (error) {
    if (error instanceof StoreUnavailable && !error.outcome.ok) return error.outcome;
    return { ok: false, reason: 'error', message: `era recheck: ${describeError(error)}`, ms: 0 };
  }
}

/** Programs get JSON: a path configured for it, or a client that accepts JSON but not HTML. */

/**
 * After the event's end: an admitted visitor keeps its session; everyone else is let through
 * (`event_after = pass`) or told the event is over. No ticket is taken and, for visitors without
 * an access token, no store call is made.
 */
export async function afterEnd(ctx: HandlerContext, request: Request, trace: Trace, nowMs: number): Promise<'pass' | 'over' | Extract<Visit, { kind: 'access' }>> {
  const { config } = ctx;
  const token = await readToken(ctx, request, nowMs, trace);
  if (token?.k === 'a') {
    const v = await accessVisit(visitorContext(ctx, token), trace, token, nowMs, false);
    if (v.kind === 'access') return v;
  }
  return config.eventAfter === 'pass' ? 'pass' : 'over';
}
