import type { Charge, Refund as ProviderRefund } from '../../../src/mock-provider/mock-provider.types';
import type { Answer, StoreSnapshot } from './stack';

/**
 * The reference model of the model-based test: what a client of one
 * sequence has been told, and what the contract (README, docs/api.md) lets
 * the service answer next. It never predicts one answer: a payment's outcome
 * may be unknown (202), a lease may be held by a request, the worker or a
 * provider event, and any of them may decide a row between two steps. It
 * keeps, instead, what cannot change once seen:
 *
 * - per key, its current incarnation (route, body, the row it created) and
 *   the bytes of its final answer once one was seen: every later answer to
 *   the same request must be those bytes, marked `Idempotent-Replayed: true`;
 * - per payment and refund, its body and its status once final; the final
 *   outcome of each is fixed by its test card (pm_card_declined fails, a
 *   refund of pm_card_refund_fails fails, everything else succeeds), so an
 *   answer or a row that says otherwise was guessed;
 * - what a payment has left to refund, as bounds: refunds whose outcome is
 *   not known yet may still hold their amount or have given it back.
 *
 * judge() checks a batch of exchanges (one request, or several sent at once)
 * against it and moves it on; checkStore() checks the store and the
 * provider against it after every step.
 */

export type Route = 'payments' | 'refunds';

/** PROVIDER_BREAKER_WINDOW_MS's default, with room for the answer's travel. */
const BREAKER_WINDOW_MS = 12_000;
export type Known = 'succeeded' | 'failed' | 'unknown';

export interface PaymentBody {
  amount: number;
  currency: string;
  payment_method: string;
}

export interface RefundBody {
  payment: string;
  amount?: number;
}

export type Body = PaymentBody | RefundBody;

export interface SentRequest {
  route: Route;
  key: string;
  body: Body;
  /** Which process took it, for messages: a, b, kill@point, stall@point. */
  via: string;
  /** Whether that process keeps final answers in its replay cache. */
  caches: boolean;
}

/** One request and what came of it. */
export type Exchange =
  | { request: SentRequest; kind: 'answer'; answer: Answer }
  /** Its process died (or froze) at a crash point after claiming the key, on this row. */
  | { request: SentRequest; kind: 'claimed'; id: string; refundAmount?: number }
  | { request: SentRequest; kind: 'error'; error: string };

/** One life of a key: from a claim until it expires. */
export interface Incarnation {
  route: Route;
  body: Body;
  fingerprint: string;
  resourceId: string;
  /** The final answer's bytes, once seen. */
  final?: { status: number; text: string };
  /** Whether a final answer without the replay mark was seen: there is at most one. */
  decidedFresh: boolean;
  /** Whether a process with a replay cache may hold its final answer (then the test never expires it). */
  cached: boolean;
}

export interface KeyModel {
  name: string;
  /** Undefined while nothing holds the key: never claimed, every request refused, or expired. */
  current?: Incarnation;
  /** The last body sent with it, for a command that sends "the same request" again. */
  lastRoute: Route;
  lastBody: Body;
  expirations: number;
}

export interface PaymentModel {
  id: string;
  body: PaymentBody;
  status: Known;
  refunds: string[];
}

export interface RefundModel {
  id: string;
  paymentId: string;
  amount: number;
  status: Known;
}

export function fingerprintOf(route: Route, body: Body): string {
  const sorted = Object.fromEntries(Object.entries(body).sort(([a], [b]) => a.localeCompare(b)));
  return `${route} ${JSON.stringify(sorted)}`;
}

/** A violation: what the contract forbids, with the exchange that showed it. */
export class Violations {
  readonly found: string[] = [];

  add(message: string, exchange?: Exchange): void {
    this.found.push(exchange ? `${message}\n    ${describeExchange(exchange)}` : message);
  }

  /** Throws one error naming every violation, for fast-check to report and shrink. */
  throwIfAny(step: string): void {
    if (this.found.length > 0) throw new Error(`${step}:\n  - ${this.found.join('\n  - ')}`);
  }
}

export function describeExchange(exchange: Exchange): string {
  const { route, key, body, via } = exchange.request;
  const request = `POST /v1/${route} via ${via} key=${key} ${JSON.stringify(body)}`;
  switch (exchange.kind) {
    case 'answer': {
      const { status, text, replayed } = exchange.answer;
      return `${request} → ${status}${replayed ? ` (Idempotent-Replayed: ${replayed})` : ''} ${text.length > 600 ? `${text.slice(0, 600)}…` : text}`;
    }
    case 'claimed':
      return `${request} → no answer: the process stopped at its crash point on ${exchange.id}`;
    case 'error':
      return `${request} → no answer: ${exchange.error}`;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** An answer's error code, if it is an error envelope. */
function errorCode(answer: Answer): string | undefined {
  const error = isObject(answer.json) ? answer.json.error : undefined;
  return isObject(error) && typeof error.code === 'string' ? error.code : undefined;
}

export class Model {
  readonly keys: KeyModel[] = [];
  readonly payments: PaymentModel[] = [];
  readonly refunds: RefundModel[] = [];
  private readonly keysByName = new Map<string, KeyModel>();
  private readonly paymentsById = new Map<string, PaymentModel>();
  private readonly refundsById = new Map<string, RefundModel>();
  private nextKey = 0;
  /** When the client was answered 202: what may open its provider circuit. */
  private readonly unknownOutcomes: number[] = [];

  constructor(
    /** Makes the sequence's keys its own (the client is new anyway; this is for reading logs). */
    readonly tag: string,
    readonly foreignPaymentId: string,
  ) {}

  private unknownOutcomesWithin(ms: number): number {
    const since = Date.now() - ms;
    return this.unknownOutcomes.filter((at) => at >= since).length;
  }

  newKeyName(): string {
    return `${this.tag}-k${this.nextKey++}`;
  }

  key(name: string): KeyModel | undefined {
    return this.keysByName.get(name);
  }

  payment(id: string): PaymentModel | undefined {
    return this.paymentsById.get(id);
  }

  refund(id: string): RefundModel | undefined {
    return this.refundsById.get(id);
  }

  /** The key a request is about to use; a new name is registered with the request's body. */
  touchKey(name: string, route: Route, body: Body): KeyModel {
    let key = this.keysByName.get(name);
    if (!key) {
      key = { name, lastRoute: route, lastBody: body, expirations: 0 };
      this.keysByName.set(name, key);
      this.keys.push(key);
    } else {
      key.lastRoute = route;
      key.lastBody = body;
    }
    return key;
  }

  /** The final outcome the payment's test card fixes. */
  static eventualPayment(body: PaymentBody): 'succeeded' | 'failed' {
    return body.payment_method === 'pm_card_declined' ? 'failed' : 'succeeded';
  }

  eventualRefund(refund: Pick<RefundModel, 'paymentId'>): 'succeeded' | 'failed' {
    return this.paymentsById.get(refund.paymentId)?.body.payment_method === 'pm_card_refund_fails' ? 'failed' : 'succeeded';
  }

  /**
   * The least a payment can have left to refund right now: every refund
   * not known to have failed holds its amount; `stillHolding` adds refunds
   * whose failure was learnt within the batch being judged (they may have
   * held it when a refusal was decided).
   */
  leftMin(payment: PaymentModel, stillHolding: ReadonlySet<string> = new Set()): number {
    let held = 0;
    for (const id of payment.refunds) {
      const refund = this.refundsById.get(id)!;
      if (refund.status !== 'failed' || stillHolding.has(id)) held += refund.amount;
    }
    return payment.body.amount - held;
  }

  /** The most it can have left: only refunds that succeeded, or will, hold their amount for sure. */
  leftMax(payment: PaymentModel): number {
    let held = 0;
    for (const id of payment.refunds) {
      const refund = this.refundsById.get(id)!;
      if (refund.status === 'succeeded' || (refund.status === 'unknown' && this.eventualRefund(refund) === 'succeeded')) held += refund.amount;
    }
    return payment.body.amount - held;
  }

  addPayment(id: string, body: PaymentBody): PaymentModel {
    const payment: PaymentModel = { id, body, status: 'unknown', refunds: [] };
    this.paymentsById.set(id, payment);
    this.payments.push(payment);
    return payment;
  }

  addRefund(id: string, paymentId: string, amount: number): RefundModel {
    const refund: RefundModel = { id, paymentId, amount, status: 'unknown' };
    this.refundsById.set(id, refund);
    this.refunds.push(refund);
    this.paymentsById.get(paymentId)!.refunds.push(id);
    return refund;
  }

  /** A final status seen (in an answer or a read): it must be the card's outcome and never change. */
  learn(kind: 'payment' | 'refund', id: string, status: string, violations: Violations, exchange?: Exchange): void {
    const row = kind === 'payment' ? this.paymentsById.get(id) : this.refundsById.get(id);
    if (!row) {
      violations.add(`a ${kind} ${id} the client was never told of`, exchange);
      return;
    }
    if (status !== 'succeeded' && status !== 'failed') return;
    const eventual = kind === 'payment' ? Model.eventualPayment((row as PaymentModel).body) : this.eventualRefund(row as RefundModel);
    if (status !== eventual) violations.add(`${kind} ${id} is ${status}, but its test card makes it ${eventual}: an outcome was guessed`, exchange);
    if (row.status !== 'unknown' && row.status !== status) {
      violations.add(`${kind} ${id} was ${row.status} and is now ${status}: a final status changed`, exchange);
    }
    row.status = status;
  }

  // ---------------------------------------------------------------------------------------------
  // Judging answers

  /**
   * Checks a batch of exchanges sent at once and moves the model on. The
   * order in which they are applied is the one the service must have had:
   * a claim by a dead process first, then 202s (given before any final
   * answer existed), then final answers (the one that decided, then
   * replays), then 409s, 422s and refusals, which each need something the
   * others established.
   */
  judge(batch: Exchange[], violations: Violations): void {
    const context: BatchContext = {
      startIncarnation: new Map(batch.map(({ request }) => [request.key, this.keysByName.get(request.key)?.current])),
      startFinal: new Set(batch.flatMap(({ request }) => (this.keysByName.get(request.key)?.current?.final ? [request.key] : []))),
      startStatus: new Map(this.payments.map((payment) => [payment.id, payment.status])),
      failedInBatch: new Set(),
      refundsOfPaymentInBatch: new Map(),
    };
    for (const { request } of batch) {
      if (request.route !== 'refunds') continue;
      const payment = (request.body as RefundBody).payment;
      context.refundsOfPaymentInBatch.set(payment, (context.refundsOfPaymentInBatch.get(payment) ?? 0) + 1);
    }
    const ordered = [...batch].sort((a, b) => rank(a) - rank(b));
    for (const exchange of ordered) this.judgeOne(exchange, context, violations);
  }

  private judgeOne(exchange: Exchange, context: BatchContext, violations: Violations): void {
    const { request } = exchange;
    const key = this.touchKey(request.key, request.route, request.body);
    const fingerprint = fingerprintOf(request.route, request.body);
    if (exchange.kind === 'error') {
      violations.add('no answer from a process that was not made to crash', exchange);
      return;
    }
    if (exchange.kind === 'claimed') {
      this.judgeClaimed(exchange, key, fingerprint, context, violations);
      return;
    }
    const { answer } = exchange;
    if (answer.status === 202 || answer.status === 201 || (answer.status === 402 && this.resourceOf(answer, request.route))) {
      this.judgeResource(exchange, answer, key, fingerprint, context, violations);
    } else if (answer.status === 409 && errorCode(answer) === 'idempotency_key_in_use') {
      const current = key.current;
      if (!current) violations.add('409 idempotency_key_in_use for a key nobody holds', exchange);
      else if (current.fingerprint !== fingerprint) violations.add('409 for a key held by another request: it must be 422 idempotency_key_reused', exchange);
      else if (context.startFinal.has(request.key)) violations.add('409 for a key that already held its final answer: it must be replayed', exchange);
      if (!answer.retryAfter) violations.add('409 idempotency_key_in_use without Retry-After', exchange);
    } else if (answer.status === 422 && errorCode(answer) === 'idempotency_key_reused') {
      if (!key.current || key.current.fingerprint === fingerprint) {
        violations.add('422 idempotency_key_reused, but the key holds no other request', exchange);
      }
    } else if (answer.status === 503 && errorCode(answer) === 'provider_unavailable') {
      // The circuit opens only on a run of unknown outcomes (more than half of 5 calls or more in 10 s);
      // it refuses a new request before anything is written, never a key that holds one.
      if (context.startIncarnation.get(request.key)) violations.add('503 provider_unavailable for a key that holds a request: it must be 202 or a replay', exchange);
      else if (this.unknownOutcomesWithin(BREAKER_WINDOW_MS) < 3) violations.add('503 provider_unavailable, but too few outcomes were unknown lately for a circuit to open', exchange);
      if (!answer.retryAfter) violations.add('503 without Retry-After', exchange);
    } else if (request.route === 'refunds' && this.isRefusal(answer)) {
      this.judgeRefusal(exchange, answer, context, violations);
    } else {
      violations.add(`an answer the contract does not allow here (${answer.status} ${errorCode(answer) ?? ''})`, exchange);
    }
    // A caching API remembers a key's final answer when it gives one, or reads one (also to answer 422).
    if (key.current && request.caches && (answer.status === 201 || answer.status === 402 || answer.status === 422)) key.current.cached = true;
  }

  private isRefusal(answer: Answer): boolean {
    const code = errorCode(answer);
    return (
      (answer.status === 400 && code === 'amount_too_large') ||
      (answer.status === 404 && code === 'resource_missing') ||
      (answer.status === 409 && code === 'payment_not_refundable')
    );
  }

  /** The payment or refund an answer carries: the body of a 201 or 202, the one embedded in a 402. */
  private resourceOf(answer: Answer, route: Route): Record<string, unknown> | undefined {
    const json = answer.json;
    if (!isObject(json)) return undefined;
    const object = route === 'payments' ? 'payment' : 'refund';
    if (answer.status === 402) {
      const error = json.error;
      const expected = route === 'payments' ? 'card_declined' : 'refund_failed';
      if (!isObject(error) || error.code !== expected) return undefined;
      const embedded = error[object];
      return isObject(embedded) && embedded.object === object ? embedded : undefined;
    }
    return json.object === object ? json : undefined;
  }

  /** A request that claimed its key (a new row, or the key's unfinished one) and then died or froze. */
  private judgeClaimed(
    exchange: Extract<Exchange, { kind: 'claimed' }>,
    key: KeyModel,
    fingerprint: string,
    context: BatchContext,
    violations: Violations,
  ): void {
    const { request, id } = exchange;
    const current = key.current;
    if (!current) {
      if (request.route === 'payments') {
        this.addPayment(id, request.body as PaymentBody);
      } else {
        const body = request.body as RefundBody;
        const amount = body.amount ?? exchange.refundAmount;
        if (amount === undefined) {
          violations.add(`refund ${id} was claimed but has no row`, exchange);
          return;
        }
        if (!this.acceptRefund(exchange, body, amount, context, violations)) return;
        this.addRefund(id, body.payment, amount);
      }
      key.current = { route: request.route, body: request.body, fingerprint, resourceId: id, decidedFresh: false, cached: false };
      return;
    }
    if (current.fingerprint !== fingerprint) violations.add('a request claimed a key that holds another request', exchange);
    else if (current.resourceId !== id) violations.add(`a retry claimed ${id}, but the key's row is ${current.resourceId}`, exchange);
    else if (current.final) violations.add('a retry resumed a row whose final answer was already given', exchange);
  }

  /** 201, 202 or 402 with the row: a claim, a resumption, or a replay. */
  private judgeResource(
    exchange: Exchange & { kind: 'answer' },
    answer: Answer,
    key: KeyModel,
    fingerprint: string,
    context: BatchContext,
    violations: Violations,
  ): void {
    const { request } = exchange;
    const resource = this.resourceOf(answer, request.route);
    if (!resource || typeof resource.id !== 'string') {
      violations.add(`a ${answer.status} that carries no ${request.route === 'payments' ? 'payment' : 'refund'}`, exchange);
      return;
    }
    const id = resource.id;
    const status = resource.status;
    const final = answer.status !== 202;
    if (!final) this.unknownOutcomes.push(Date.now());
    if (final) {
      const wanted = answer.status === 201 ? 'succeeded' : 'failed';
      if (status !== wanted) violations.add(`a ${answer.status} whose row is ${String(status)}`, exchange);
    } else {
      if (status !== 'pending' && status !== 'requires_review') violations.add(`a 202 whose row is ${String(status)}`, exchange);
      if (!answer.retryAfter) violations.add('a 202 without Retry-After', exchange);
      if (answer.replayed) violations.add('a 202 marked as a replay', exchange);
    }
    this.checkFields(exchange, resource, violations);

    const current = key.current;
    if (!current) {
      // A new claim: the request's own row.
      if (answer.replayed) {
        violations.add('a replay for a key that held no answer', exchange);
        return;
      }
      if (request.route === 'payments') {
        if (this.paymentsById.has(id)) {
          violations.add(`a new payment answered with ${id}, which another key made`, exchange);
          return;
        }
        this.addPayment(id, request.body as PaymentBody);
      } else {
        if (this.refundsById.has(id)) {
          violations.add(`a new refund answered with ${id}, which another key made`, exchange);
          return;
        }
        const body = request.body as RefundBody;
        if (typeof resource.amount !== 'number' || !this.acceptRefund(exchange, body, resource.amount, context, violations)) return;
        this.addRefund(id, body.payment, resource.amount);
      }
      key.current = { route: request.route, body: request.body, fingerprint, resourceId: id, decidedFresh: false, cached: false };
      if (final) {
        key.current.final = { status: answer.status, text: answer.text };
        key.current.decidedFresh = true;
        this.learnFinal(request.route, id, String(status), exchange, context, violations);
      }
      return;
    }
    if (current.fingerprint !== fingerprint) {
      violations.add('a key that holds another request answered as if it were this one: it must be 422 idempotency_key_reused', exchange);
      return;
    }
    if (current.resourceId !== id) {
      violations.add(`the key's row is ${current.resourceId}, the answer's ${id}: one key, two rows`, exchange);
      return;
    }
    if (current.final) {
      if (!final) violations.add('a 202 for a key that held its final answer', exchange);
      else if (answer.replayed !== 'true') violations.add('a final answer given again without Idempotent-Replayed: true', exchange);
      else if (answer.status !== current.final.status || answer.text !== current.final.text) {
        violations.add(`a replay that is not byte for byte the stored answer, which was:\n    ${current.final.status} ${current.final.text}`, exchange);
      }
      return;
    }
    if (!final) return;
    if (!answer.replayed) {
      if (current.decidedFresh) violations.add('a second final answer without the replay mark: the row was decided twice', exchange);
      current.decidedFresh = true;
    } else if (answer.replayed !== 'true') {
      violations.add(`Idempotent-Replayed: ${answer.replayed}`, exchange);
    }
    current.final = { status: answer.status, text: answer.text };
    this.learnFinal(request.route, id, String(status), exchange, context, violations);
  }

  private learnFinal(route: Route, id: string, status: string, exchange: Exchange, context: BatchContext, violations: Violations): void {
    this.learn(route === 'payments' ? 'payment' : 'refund', id, status, violations, exchange);
    if (route === 'refunds' && status === 'failed') context.failedInBatch.add(id);
  }

  /** The row an answer carries is the one asked for. */
  private checkFields(exchange: Exchange, resource: Record<string, unknown>, violations: Violations): void {
    const { route, body } = exchange.request;
    if (route === 'payments') {
      const asked = body as PaymentBody;
      if (resource.amount !== asked.amount || resource.currency !== asked.currency || resource.payment_method !== asked.payment_method) {
        violations.add('the payment answered is not the one asked for', exchange);
      }
      return;
    }
    const asked = body as RefundBody;
    if (resource.payment !== asked.payment || (asked.amount !== undefined && resource.amount !== asked.amount)) {
      violations.add('the refund answered is not the one asked for', exchange);
    }
  }

  /**
   * A new refund of `amount` was accepted (claimed): the payment must be the
   * client's, refundable (succeeded, which the model then knows), and have
   * that much left. In a batch, the refunds accepted before it count against
   * what is left, so the sum of those accepted never passes the most left.
   */
  private acceptRefund(exchange: Exchange, body: RefundBody, amount: number, context: BatchContext, violations: Violations): boolean {
    const payment = this.paymentsById.get(body.payment);
    if (!payment) {
      violations.add(`a refund accepted for ${body.payment}, which is not a payment of this client`, exchange);
      return false;
    }
    if (payment.status === 'failed' || Model.eventualPayment(payment.body) === 'failed') {
      violations.add(`a refund accepted for payment ${payment.id}, which fails`, exchange);
    }
    const leftMax = this.leftMax(payment);
    if (amount < 1 || amount > leftMax) {
      violations.add(`a refund of ${amount} accepted where at most ${leftMax} of ${payment.body.amount} was left: refunds above the payment`, exchange);
    }
    // Alone, a refund of all that is left takes exactly that, which lies between the bounds.
    if (body.amount === undefined && (context.refundsOfPaymentInBatch.get(payment.id) ?? 0) === 1) {
      const leftMin = this.leftMin(payment);
      if (amount < leftMin) violations.add(`a refund of "all that is left" took ${amount} where at least ${leftMin} was left`, exchange);
    }
    if (payment.status === 'unknown') payment.status = 'succeeded';
    return true;
  }

  /** 404, 409 payment_not_refundable, 400 amount_too_large: each only when the payment's state allows it. */
  private judgeRefusal(exchange: Exchange, answer: Answer, context: BatchContext, violations: Violations): void {
    const { request } = exchange;
    if (context.startIncarnation.get(request.key)) {
      violations.add('a refusal for a key that already holds a request: it must be replayed, 409 or 422', exchange);
      return;
    }
    const body = request.body as RefundBody;
    const payment = this.paymentsById.get(body.payment);
    const code = errorCode(answer);
    if (code === 'resource_missing') {
      if (payment) violations.add(`404 for payment ${payment.id}, which the client made`, exchange);
      return;
    }
    if (!payment) {
      violations.add(`${answer.status} ${code} for a payment that is not the client's: it must be 404`, exchange);
      return;
    }
    const statusThen = context.startStatus.get(payment.id) ?? payment.status;
    if (code === 'payment_not_refundable') {
      if (statusThen === 'succeeded') violations.add(`409 payment_not_refundable for payment ${payment.id}, which had succeeded`, exchange);
      return;
    }
    // 400 amount_too_large: the payment had succeeded, and had less left than asked.
    if (statusThen === 'failed') violations.add(`400 amount_too_large for payment ${payment.id}, which failed: it must be 409`, exchange);
    const leftMin = this.leftMin(payment, context.failedInBatch);
    const wanted = body.amount ?? 1;
    if (wanted <= leftMin) violations.add(`400 amount_too_large for ${body.amount ?? 'all that is left'} where at least ${leftMin} was left`, exchange);
    if (payment.status === 'unknown') payment.status = 'succeeded';
  }

  // ---------------------------------------------------------------------------------------------
  // The store and the provider

  /**
   * After every step: the client's rows are exactly those its answers
   * named; a final status never changes and is its card's outcome; every
   * stored answer is the one the client saw; what a payment reserved and
   * refunded is the sum of its refunds and never above it; and the
   * provider holds at most one charge per payment, at most one refund per
   * refund, never refunds above a charge, and agrees with every final row.
   */
  checkStore(store: StoreSnapshot, charges: Charge[], providerRefunds: ProviderRefund[], violations: Violations): void {
    const rowsById = new Map(store.payments.map((row) => [row.id, row]));
    const refundRowsById = new Map(store.refunds.map((row) => [row.id, row]));
    for (const row of store.payments) if (!this.paymentsById.has(row.id)) violations.add(`payment ${row.id} exists, but no answer named it`);
    for (const row of store.refunds) if (!this.refundsById.has(row.id)) violations.add(`refund ${row.id} exists, but no answer named it`);

    for (const payment of this.payments) {
      const row = rowsById.get(payment.id);
      if (!row) {
        violations.add(`payment ${payment.id} was answered but is not stored: lost`);
        continue;
      }
      if (row.amount !== payment.body.amount || row.currency !== payment.body.currency || row.payment_method !== payment.body.payment_method) {
        violations.add(`payment ${payment.id} is stored as ${row.amount} ${row.currency} ${row.payment_method}, not as asked`);
      }
      this.checkStatus('payment', payment.id, payment.status, row.status, Model.eventualPayment(payment.body), violations);
      const refunds = store.refunds.filter((refund) => refund.payment_id === payment.id);
      const reserved = refunds.filter((refund) => refund.status !== 'failed').reduce((sum, refund) => sum + refund.amount, 0);
      const refunded = refunds.filter((refund) => refund.status === 'succeeded').reduce((sum, refund) => sum + refund.amount, 0);
      if (row.amount_reserved !== reserved || row.amount_refunded !== refunded) {
        violations.add(
          `payment ${payment.id} has amount_reserved ${row.amount_reserved} and amount_refunded ${row.amount_refunded}; its refunds sum to ${reserved} not failed and ${refunded} succeeded`,
        );
      }
      if (reserved > row.amount || refunded > row.amount) violations.add(`payment ${payment.id} of ${row.amount}: refunds of ${reserved} reserved, ${refunded} refunded`);
    }
    for (const refund of this.refunds) {
      const row = refundRowsById.get(refund.id);
      if (!row) {
        violations.add(`refund ${refund.id} was answered but is not stored: lost`);
        continue;
      }
      if (row.amount !== refund.amount || row.payment_id !== refund.paymentId) {
        violations.add(`refund ${refund.id} is stored as ${row.amount} of ${row.payment_id}, not ${refund.amount} of ${refund.paymentId}`);
      }
      this.checkStatus('refund', refund.id, refund.status, row.status, this.eventualRefund(refund), violations);
    }

    const keyRows = new Map(store.keys.map((row) => [row.key, row]));
    for (const key of this.keys) {
      const row = keyRows.get(key.name);
      const current = key.current;
      if (!current) {
        if (row && !row.expired) violations.add(`key ${key.name} holds ${row.resource_id}, though every request with it was refused or it expired`);
        continue;
      }
      if (!row) {
        violations.add(`key ${key.name} of ${current.resourceId} is gone before it expired`);
        continue;
      }
      if (row.resource_id !== current.resourceId) violations.add(`key ${key.name} names ${row.resource_id}, but its answers named ${current.resourceId}`);
      if (current.final && (row.response_status !== current.final.status || row.response_body !== current.final.text)) {
        violations.add(`key ${key.name} stores ${row.response_status} ${row.response_body}, not the final answer given:\n    ${current.final.status} ${current.final.text}`);
      }
    }

    // The provider: read after the store, so whatever the store says was decided, the provider already did.
    const ids = new Set(this.payments.map((payment) => payment.id));
    const chargesOf = new Map<string, Charge[]>();
    for (const charge of charges) {
      if (!ids.has(charge.reference)) continue;
      chargesOf.set(charge.reference, [...(chargesOf.get(charge.reference) ?? []), charge]);
    }
    const chargeById = new Map<string, Charge>();
    for (const payment of this.payments) {
      const row = rowsById.get(payment.id);
      const held = chargesOf.get(payment.id) ?? [];
      for (const charge of held) chargeById.set(charge.id, charge);
      if (held.length > 1) violations.add(`payment ${payment.id} has ${held.length} charges at the provider: ${held.map((charge) => `${charge.id} (${charge.status})`).join(', ')}`);
      for (const charge of held) {
        if (charge.idempotency_key !== `pk_${payment.id}` || charge.amount !== payment.body.amount || charge.currency !== payment.body.currency) {
          violations.add(`charge ${charge.id} of payment ${payment.id} is ${charge.amount} ${charge.currency} under ${charge.idempotency_key}`);
        }
      }
      if (!row) continue;
      const charge = held[0];
      if (row.status === 'succeeded' && (charge?.status !== 'succeeded' || charge.id !== row.provider_charge_id)) {
        violations.add(`payment ${payment.id} succeeded with charge ${row.provider_charge_id}, but the provider holds ${charge ? `${charge.id} (${charge.status})` : 'no charge'}`);
      }
      if (row.status === 'failed' && charge?.status === 'succeeded') violations.add(`payment ${payment.id} failed, but its charge ${charge.id} succeeded`);
    }
    const refundIds = new Set(this.refunds.map((refund) => refund.id));
    const providerRefundsOf = new Map<string, ProviderRefund[]>();
    const byCharge = new Map<string, ProviderRefund[]>();
    for (const providerRefund of providerRefunds) {
      if (chargeById.has(providerRefund.charge)) byCharge.set(providerRefund.charge, [...(byCharge.get(providerRefund.charge) ?? []), providerRefund]);
      if (!refundIds.has(providerRefund.reference)) continue;
      providerRefundsOf.set(providerRefund.reference, [...(providerRefundsOf.get(providerRefund.reference) ?? []), providerRefund]);
    }
    for (const refund of this.refunds) {
      const held = providerRefundsOf.get(refund.id) ?? [];
      if (held.length > 1) violations.add(`refund ${refund.id} was refunded ${held.length} times at the provider`);
      const payment = rowsById.get(refund.paymentId);
      for (const providerRefund of held) {
        if (providerRefund.idempotency_key !== `rk_${refund.id}` || providerRefund.amount !== refund.amount || providerRefund.charge !== payment?.provider_charge_id) {
          violations.add(`provider refund ${providerRefund.id} of ${refund.id} is ${providerRefund.amount} of ${providerRefund.charge} under ${providerRefund.idempotency_key}`);
        }
      }
      const row = refundRowsById.get(refund.id);
      const providerRefund = held[0];
      if (row?.status === 'succeeded' && (providerRefund?.status !== 'succeeded' || providerRefund.id !== row.provider_refund_id)) {
        violations.add(`refund ${refund.id} succeeded as ${row.provider_refund_id}, but the provider holds ${providerRefund ? `${providerRefund.id} (${providerRefund.status})` : 'no refund'}`);
      }
      if (row?.status === 'failed' && providerRefund && providerRefund.status !== 'failed') {
        violations.add(`refund ${refund.id} failed, but the provider's ${providerRefund.id} is ${providerRefund.status}: the amount was given back while refunded`);
      }
    }
    for (const [chargeId, refunds] of byCharge) {
      const charge = chargeById.get(chargeId)!;
      const total = refunds.filter((refund) => refund.status !== 'failed').reduce((sum, refund) => sum + refund.amount, 0);
      if (total > charge.amount) violations.add(`charge ${chargeId} of ${charge.amount} has ${total} refunded at the provider`);
    }
  }

  private checkStatus(kind: 'payment' | 'refund', id: string, known: Known, stored: string, eventual: string, violations: Violations): void {
    if (known !== 'unknown' && stored !== known) violations.add(`${kind} ${id} was answered ${known} and is stored ${stored}`);
    if ((stored === 'succeeded' || stored === 'failed') && stored !== eventual) {
      violations.add(`${kind} ${id} is stored ${stored}, but its test card makes it ${eventual}: an outcome was guessed`);
    }
  }

  /** Once the worker has run: nothing of the client is left undecided, and every row has its card's outcome. */
  checkAllFinal(store: StoreSnapshot, violations: Violations): void {
    for (const row of [...store.payments, ...store.refunds]) {
      if (row.status !== 'succeeded' && row.status !== 'failed') violations.add(`${row.id} is still ${row.status} after the worker ran`);
    }
  }
}

interface BatchContext {
  /** Each key's incarnation when the batch was sent. */
  startIncarnation: Map<string, Incarnation | undefined>;
  /** The keys whose final answer was known when the batch was sent. */
  startFinal: Set<string>;
  /** Each payment's known status when the batch was sent. */
  startStatus: Map<string, Known>;
  /** Refunds learnt failed within the batch: they may still have held their amount when another was refused. */
  failedInBatch: Set<string>;
  /** How many requests of the batch refund each payment. */
  refundsOfPaymentInBatch: Map<string, number>;
}

/** The order in which a batch's exchanges are applied (see Model.judge). */
function rank(exchange: Exchange): number {
  if (exchange.kind !== 'answer') return exchange.kind === 'claimed' ? 0 : 7;
  const { status, replayed } = exchange.answer;
  if (status === 202) return 1;
  if (status === 201 || status === 402) return replayed ? 3 : 2;
  if (status === 409) return 4;
  if (status === 422) return 5;
  return 6;
}
