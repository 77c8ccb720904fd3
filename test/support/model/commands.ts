import { setTimeout as delay } from 'node:timers/promises';
import fc from 'fast-check';
import type { ListedProviderEvent } from '../../../src/mock-provider/mock-provider.types';
import {
  type Body,
  type Exchange,
  type KeyModel,
  Model,
  type PaymentBody,
  type RefundBody,
  type Route,
  type SentRequest,
  Violations,
} from './model';
import { API_CRASH_POINTS, type ApiCrashPoint, type ApiName, type Client, KNOBS, type ModelStack } from './stack';

/**
 * The commands of the model-based test: each draws its parameters with
 * fast-check, resolves them against the model when it runs (indexes pick
 * among the keys, payments and refunds the sequence has made so far), sends
 * what it sends to the real processes, judges every answer against the
 * model (Model.judge), and then checks the store and the provider
 * (Model.checkStore). A violation throws, so fast-check stops the sequence,
 * shrinks it and prints it with its seed.
 */

/** What a sequence runs against: the stack, its own API client, and the run's counters. */
export interface Real {
  stack: ModelStack;
  client: Client;
  stats: RunStats;
}

export interface RunStats {
  sequences: number;
  steps: number;
  requests: number;
  commands: Record<string, number>;
  answers: Record<string, number>;
}

export function emptyStats(): RunStats {
  return { sequences: 0, steps: 0, requests: 0, commands: {}, answers: {} };
}

type ModelCommand = fc.AsyncCommand<Model, Real>;

const CURRENCIES = ['EUR', 'USD', 'JPY'] as const;
const AMOUNTS = [100, 250, 500, 1000] as const;
const REFUND_AMOUNTS = [50, 100, 200, 300, 600] as const;
/** The test cards, the faults by token (docs/api.md). */
const METHODS = [
  'pm_card_ok',
  'pm_card_declined',
  'pm_card_lost_response',
  'pm_card_timeout',
  'pm_card_flaky',
  'pm_card_pending',
  'pm_card_refund_fails',
  'pm_card_refund_lost_response',
  'pm_card_refund_timeout',
  'pm_card_refund_pending',
] as const;
/** A payment id no client has. */
const NO_SUCH_PAYMENT = 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B';

interface PaymentSpec {
  amount: number;
  currency: string;
  method: string;
}

type RefundTarget = { kind: 'own'; index: number } | { kind: 'none' } | { kind: 'foreign' };
type RefundAmount = number | 'rest';

/** A request to make: a new key with a payment or a refund, or an existing key again. */
type Plan =
  | { kind: 'pay'; spec: PaymentSpec }
  | { kind: 'refund'; target: RefundTarget; amount: RefundAmount }
  /** The key `index` again: the same request, another body on its route, or the other route. */
  | { kind: 'again'; index: number; variant: 'same' | 'other_body' | 'other_route'; spec: PaymentSpec; target: RefundTarget; amount: RefundAmount };

const paymentSpec = fc.record({
  amount: fc.constantFrom(...AMOUNTS),
  currency: fc.constantFrom(...CURRENCIES),
  method: fc.constantFrom(...METHODS),
});
const refundTarget: fc.Arbitrary<RefundTarget> = fc.oneof(
  { weight: 8, arbitrary: fc.nat(50).map((index) => ({ kind: 'own' as const, index })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'foreign' as const }) },
);
const refundAmount: fc.Arbitrary<RefundAmount> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...REFUND_AMOUNTS) },
  { weight: 1, arbitrary: fc.constant('rest' as const) },
);
const plan: fc.Arbitrary<Plan> = fc.oneof(
  { weight: 3, arbitrary: paymentSpec.map((spec) => ({ kind: 'pay' as const, spec })) },
  { weight: 3, arbitrary: fc.record({ target: refundTarget, amount: refundAmount }).map((r) => ({ kind: 'refund' as const, ...r })) },
  {
    weight: 3,
    arbitrary: fc
      .record({
        index: fc.nat(50),
        variant: fc.constantFrom('same' as const, 'same' as const, 'other_body' as const, 'other_route' as const),
        spec: paymentSpec,
        target: refundTarget,
        amount: refundAmount,
      })
      .map((r) => ({ kind: 'again' as const, ...r })),
  },
);
const via = fc.constantFrom<ApiName>('a', 'b');

function describeSpec(spec: PaymentSpec): string {
  return `${spec.amount} ${spec.currency} ${spec.method}`;
}

function describeRefund(target: RefundTarget, amount: RefundAmount): string {
  const of = target.kind === 'own' ? `payment #${target.index}` : target.kind === 'none' ? 'no such payment' : "another client's payment";
  return `${amount === 'rest' ? 'the rest' : amount} of ${of}`;
}

function describePlan(p: Plan): string {
  switch (p.kind) {
    case 'pay':
      return `pay ${describeSpec(p.spec)}`;
    case 'refund':
      return `refund ${describeRefund(p.target, p.amount)}`;
    case 'again':
      return `key #${p.index} again (${p.variant === 'same' ? 'the same request' : p.variant === 'other_body' ? 'another body' : `on the other route: pay ${describeSpec(p.spec)} or refund ${describeRefund(p.target, p.amount)}`})`;
  }
}

/** Whether the model has what a plan refers to. */
function planFits(m: Readonly<Model>, p: Plan): boolean {
  if (p.kind === 'again') return m.keys.length > 0;
  return p.kind !== 'refund' || p.target.kind !== 'own' || m.payments.length > 0;
}

function paymentBody(spec: PaymentSpec): PaymentBody {
  return { amount: spec.amount, currency: spec.currency, payment_method: spec.method };
}

function refundBody(m: Model, target: RefundTarget, amount: RefundAmount): RefundBody {
  const payment =
    target.kind === 'own' && m.payments.length > 0
      ? m.payments[target.index % m.payments.length].id
      : target.kind === 'foreign'
        ? m.foreignPaymentId
        : NO_SUCH_PAYMENT;
  return amount === 'rest' ? { payment } : { payment, amount };
}

/** Another body on the same route: the request differs, so the key must answer 422. */
function otherBody(route: Route, body: Body): Body {
  if (route === 'payments') {
    const payment = body as PaymentBody;
    return { ...payment, amount: payment.amount + 1 };
  }
  const refund = body as RefundBody;
  return refund.amount === undefined ? { ...refund, amount: 1 } : { payment: refund.payment };
}

/** The route, key and body a plan comes to, now. */
function resolve(m: Model, p: Plan): { route: Route; key: string; body: Body } {
  switch (p.kind) {
    case 'pay':
      return { route: 'payments', key: m.newKeyName(), body: paymentBody(p.spec) };
    case 'refund':
      return { route: 'refunds', key: m.newKeyName(), body: refundBody(m, p.target, p.amount) };
    case 'again': {
      const key = m.keys[p.index % m.keys.length];
      const route = key.current?.route ?? key.lastRoute;
      const body = key.current?.body ?? key.lastBody;
      if (p.variant === 'same') return { route, key: key.name, body };
      if (p.variant === 'other_body') return { route, key: key.name, body: otherBody(route, body) };
      return route === 'payments'
        ? { route: 'refunds', key: key.name, body: refundBody(m, p.target, p.amount) }
        : { route: 'payments', key: key.name, body: paymentBody(p.spec) };
    }
  }
}

const MAIN_APIS: ApiName[] = ['a', 'b'];

function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

function countAnswer(r: Real, exchange: Exchange): void {
  r.stats.requests++;
  if (exchange.kind === 'answer') bump(r.stats.answers, String(exchange.answer.status));
  else bump(r.stats.answers, exchange.kind === 'claimed' ? 'no answer (crash point)' : 'no answer');
}

/** Sends each request to a main API at once; each becomes an exchange, answered or not. */
async function sendAll(r: Real, requests: { route: Route; key: string; body: Body; via: ApiName }[]): Promise<Exchange[]> {
  const exchanges = await Promise.all(
    requests.map(async ({ route, key, body, via: api }): Promise<Exchange> => {
      const request: SentRequest = { route, key, body, via: api, caches: api === 'a' };
      try {
        return { request, kind: 'answer', answer: await r.stack.post(r.stack.apis[api].url, r.client, `/v1/${route}`, key, body) };
      } catch (error) {
        return { request, kind: 'error', error: (error as Error).message };
      }
    }),
  );
  for (const exchange of exchanges) countAnswer(r, exchange);
  return exchanges;
}

/** The end of every step: the store and the provider against the model. */
async function checkStore(m: Model, r: Real, violations: Violations, step: string): Promise<void> {
  const store = await r.stack.snapshot(r.client.id);
  const [charges, refunds] = await Promise.all([r.stack.providerCharges(), r.stack.providerRefunds()]);
  m.checkStore(store, charges, refunds, violations);
  violations.throwIfAny(step);
}

abstract class Step implements ModelCommand {
  abstract check(m: Readonly<Model>): boolean;
  abstract toString(): string;
  protected abstract act(m: Model, r: Real, violations: Violations): Promise<void>;

  async run(m: Model, r: Real): Promise<void> {
    r.stats.steps++;
    bump(r.stats.commands, this.constructor.name);
    const violations = new Violations();
    await this.act(m, r, violations);
    await checkStore(m, r, violations, this.toString());
  }
}

/** One request, or `copies` identical ones at once spread over both APIs (concurrent duplicates). */
export class Send extends Step {
  constructor(
    readonly plan: Plan,
    readonly via: ApiName,
    readonly copies: number,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return planFits(m, this.plan);
  }

  toString(): string {
    return `Send(${describePlan(this.plan)}${this.copies > 1 ? ` ×${this.copies} at once` : ''} via ${this.via})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const { route, key, body } = resolve(m, this.plan);
    const start = MAIN_APIS.indexOf(this.via);
    const requests = Array.from({ length: this.copies }, (_, i) => ({ route, key, body, via: MAIN_APIS[(start + i) % 2] }));
    m.judge(await sendAll(r, requests), violations);
  }
}

/** Two or three different requests under one key at once: one wins, the others are 422. */
export class Collide extends Step {
  constructor(
    readonly plans: Plan[],
    readonly fresh: boolean,
    readonly index: number,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return (this.fresh || m.keys.length > 0) && this.plans.every((p) => planFits(m, p));
  }

  toString(): string {
    return `Collide(${this.fresh ? 'a new key' : `key #${this.index}`}: ${this.plans.map(describePlan).join(' | ')})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const key = this.fresh ? m.newKeyName() : m.keys[this.index % m.keys.length].name;
    const requests = this.plans.map((p, i) => {
      const { route, body } = resolve(m, p);
      return { route, key, body, via: MAIN_APIS[i % 2] };
    });
    m.judge(await sendAll(r, requests), violations);
  }
}

/** Several refunds of one payment at once, each under its own key: together never above the payment. */
export class RefundRace extends Step {
  constructor(
    readonly index: number,
    readonly amounts: RefundAmount[],
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return m.payments.length > 0;
  }

  toString(): string {
    return `RefundRace(payment #${this.index}: ${this.amounts.join(', ')} at once)`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const requests = this.amounts.map((amount, i) => ({
      route: 'refunds' as const,
      key: m.newKeyName(),
      body: refundBody(m, { kind: 'own', index: this.index }, amount),
      via: MAIN_APIS[i % 2],
    }));
    m.judge(await sendAll(r, requests), violations);
  }
}

/** One request to an API process that SIGKILLs itself at a crash point: no answer, a row left pending under a lease. */
export class CrashApi extends Step {
  constructor(
    readonly point: ApiCrashPoint,
    readonly plan: Plan,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return planFits(m, this.plan);
  }

  toString(): string {
    return `CrashApi(${describePlan(this.plan)}, SIGKILL at ${this.point})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const { route, key, body } = resolve(m, this.plan);
    const request: SentRequest = { route, key, body, via: `kill@${this.point}`, caches: false };
    const sent = await r.stack.sendToKillApi(this.point, r.client, `/v1/${route}`, key, body);
    const exchange: Exchange =
      sent.kind === 'answered'
        ? { request, kind: 'answer', answer: sent.answer }
        : {
            request,
            kind: 'claimed',
            id: sent.id,
            refundAmount: route === 'refunds' ? await r.stack.refundAmount(r.client.id, sent.id) : undefined,
          };
    countAnswer(r, exchange);
    m.judge([exchange], violations);
  }
}

/**
 * One request to an API process that freezes (SIGSTOP) at a crash point;
 * while it is frozen, for a moment or past its lease, the client may retry
 * on the main APIs (the retry takes the lease over once it has expired);
 * then the frozen process goes on, and its late answer must agree.
 */
export class StallApi extends Step {
  constructor(
    readonly point: ApiCrashPoint,
    readonly plan: Plan,
    readonly pastLease: boolean,
    readonly retries: number,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return planFits(m, this.plan);
  }

  toString(): string {
    return `StallApi(${describePlan(this.plan)}, SIGSTOP at ${this.point} ${this.pastLease ? 'past the lease' : 'briefly'}, ${this.retries} retries meanwhile)`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const { route, key, body } = resolve(m, this.plan);
    const request: SentRequest = { route, key, body, via: `stall@${this.point}`, caches: false };
    const sent = await r.stack.sendToStallApi(this.point, r.client, `/v1/${route}`, key, body);
    if (sent.kind === 'answered') {
      const exchange: Exchange = { request, kind: 'answer', answer: sent.answer };
      countAnswer(r, exchange);
      m.judge([exchange], violations);
      return;
    }
    let retried: Exchange[] = [];
    try {
      const refundAmount = route === 'refunds' ? await r.stack.refundAmount(r.client.id, sent.id) : undefined;
      m.judge([{ request, kind: 'claimed', id: sent.id, refundAmount }], violations);
      await delay(this.pastLease ? KNOBS.leaseMs + 300 : 150);
      if (this.retries > 0) {
        retried = await sendAll(r, Array.from({ length: this.retries }, (_, i) => ({ route, key, body, via: MAIN_APIS[i % 2] })));
      }
    } finally {
      await r.stack.resumeStalled(this.point);
    }
    const late = await sent.answer!;
    const exchange: Exchange = 'status' in late ? { request, kind: 'answer', answer: late } : { request, kind: 'error', error: late.error };
    countAnswer(r, exchange);
    // The frozen request was in flight all along: the retries and it are judged as sent at once.
    m.judge([...retried, exchange], violations);
  }
}

export type WorkerAction = 'pause' | 'resume' | 'kill' | 'crash_mid_job';

/** The worker frozen (SIGSTOP) or let go on, SIGKILLed anywhere, or replaced by one that dies in its first reconcile job. */
export class Worker extends Step {
  constructor(readonly action: WorkerAction) {
    super();
  }

  check(): boolean {
    return true;
  }

  toString(): string {
    return `Worker(${this.action})`;
  }

  protected async act(_m: Model, r: Real): Promise<void> {
    const { worker } = r.stack;
    switch (this.action) {
      case 'pause':
        return worker.pause();
      case 'resume':
        return worker.resume();
      case 'kill':
        return worker.kill();
      case 'crash_mid_job':
        return worker.replaceByMidJobCrasher();
    }
  }
}

/** How long the worker gets to decide everything of the client. */
const DRAIN_DEADLINE_MS = 30_000;

/**
 * The worker runs until nothing of the client is undecided: then every row
 * is final with its card's outcome, and reading each through the API says so.
 */
async function drain(m: Model, r: Real, violations: Violations): Promise<void> {
  await r.stack.resumeAllStalled();
  await r.stack.worker.ensureRunning();
  const deadline = Date.now() + DRAIN_DEADLINE_MS;
  while ((await r.stack.undecided(r.client.id)) > 0 && Date.now() < deadline) {
    await delay(100);
    // A worker killed meanwhile (a mid-job crasher) is replaced: wait for its successor.
    await r.stack.worker.ensureRunning();
  }
  m.checkAllFinal(await r.stack.snapshot(r.client.id), violations);
  for (const payment of m.payments) await read(m, r, 'payment', payment.id, MAIN_APIS[m.payments.indexOf(payment) % 2], violations, true);
  for (const refund of m.refunds) await read(m, r, 'refund', refund.id, MAIN_APIS[m.refunds.indexOf(refund) % 2], violations, true);
}

/** GET a payment or refund: 200, the row asked for, its status one the model allows (and final, when `final`). */
async function read(
  m: Model,
  r: Real,
  kind: 'payment' | 'refund',
  id: string,
  api: ApiName,
  violations: Violations,
  final = false,
): Promise<void> {
  const answer = await r.stack.get(api, r.client, `/v1/${kind}s/${id}`);
  r.stats.requests++;
  bump(r.stats.answers, `GET ${answer.status}`);
  const body = answer.json as { id?: string; status?: string; amount?: number; amount_refunded?: number } | undefined;
  const what = `GET /v1/${kind}s/${id} via ${api} → ${answer.status} ${answer.text.slice(0, 400)}`;
  if (answer.status !== 200 || body?.id !== id) {
    violations.add(`a ${kind} the client was told of cannot be read\n    ${what}`);
    return;
  }
  if (final && body.status !== 'succeeded' && body.status !== 'failed') violations.add(`${kind} ${id} is still ${body.status} after the worker ran\n    ${what}`);
  if (kind === 'payment' && (body.amount_refunded ?? 0) > (body.amount ?? 0)) violations.add(`payment ${id} shows more refunded than paid\n    ${what}`);
  const before = violations.found.length;
  m.learn(kind, id, body.status ?? '', violations);
  if (violations.found.length > before) violations.found[violations.found.length - 1] += `\n    ${what}`;
}

/** The worker runs until the client has nothing undecided (a sweep and its reconcile jobs, as often as it takes). */
export class Sweep extends Step {
  check(): boolean {
    return true;
  }

  toString(): string {
    return 'Sweep()';
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    await drain(m, r, violations);
  }
}

/** Time passes: leases run out, pending charges settle, late events arrive. */
export class Wait extends Step {
  constructor(readonly ms: number) {
    super();
  }

  check(): boolean {
    return true;
  }

  toString(): string {
    return `Wait(${this.ms} ms)`;
  }

  protected async act(): Promise<void> {
    await delay(this.ms);
  }
}

/** GET one payment or refund of the sequence. */
export class Read extends Step {
  constructor(
    readonly kind: 'payment' | 'refund',
    readonly index: number,
    readonly via: ApiName,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return (this.kind === 'payment' ? m.payments : m.refunds).length > 0;
  }

  toString(): string {
    return `Read(${this.kind} #${this.index} via ${this.via})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const rows = this.kind === 'payment' ? m.payments : m.refunds;
    await read(m, r, this.kind, rows[this.index % rows.length].id, this.via, violations);
  }
}

/**
 * A provider event of the sequence's rows delivered again, late (after the
 * provider's own delivery, or before it when that is still delayed): 200
 * whatever it comes to, or 409 payment_busy while a lease holds the row;
 * the store checks after it say it changed nothing final.
 */
export class RedeliverEvent extends Step {
  constructor(
    readonly index: number,
    readonly via: ApiName,
  ) {
    super();
  }

  check(m: Readonly<Model>): boolean {
    return m.payments.length > 0;
  }

  toString(): string {
    return `RedeliverEvent(#${this.index} via ${this.via})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const ours = new Set([...m.payments.map((payment) => payment.id), ...m.refunds.map((refund) => refund.id)]);
    const events = (await r.stack.providerEvents()).filter((event: ListedProviderEvent) => ours.has(event.data.reference));
    if (events.length === 0) return;
    const event = events[this.index % events.length];
    const answer = await r.stack.deliverEvent(this.via, event);
    r.stats.requests++;
    bump(r.stats.answers, `event ${answer.status}`);
    const code = (answer.json as { error?: { code?: string } } | undefined)?.error?.code;
    if (answer.status !== 200 && !(answer.status === 409 && code === 'payment_busy')) {
      violations.add(`provider event ${event.id} (${event.type} v${event.data.version} of ${event.data.reference}) delivered again → ${answer.status} ${answer.text}`);
    }
  }
}

/**
 * A key's retention runs out: its expires_at moves into the past, as time
 * passing does. Only a key with its final answer (nothing else expires) that
 * no replay-caching process has seen: the caching API keeps an answer as
 * long as Postgres did when it read it, and a clock moved in Postgres alone
 * would outlive it there. From then on the key is a new request's.
 */
export class ExpireKey extends Step {
  constructor(readonly index: number) {
    super();
  }

  private static eligible(m: Readonly<Model>): KeyModel[] {
    return m.keys.filter((key) => key.current?.final && !key.current.cached);
  }

  check(m: Readonly<Model>): boolean {
    return ExpireKey.eligible(m).length > 0;
  }

  toString(): string {
    return `ExpireKey(#${this.index})`;
  }

  protected async act(m: Model, r: Real, violations: Violations): Promise<void> {
    const eligible = ExpireKey.eligible(m);
    const key = eligible[this.index % eligible.length];
    if (!(await r.stack.expireKey(r.client.id, key.name))) violations.add(`key ${key.name} was answered finally but holds no final answer to expire`);
    key.current = undefined;
    key.expirations++;
  }
}

/** Every command, weighted: mostly requests, and now and then a fault. */
export function commandArbitrary(options: { crashes: boolean }): fc.Arbitrary<ModelCommand> {
  const copies = fc.oneof({ weight: 3, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 4 }) });
  const point = fc.constantFrom(...API_CRASH_POINTS);
  const arbitraries: fc.WeightedArbitrary<ModelCommand>[] = [
    { weight: 12, arbitrary: fc.tuple(plan, via, copies).map(([p, v, c]) => new Send(p, v, c)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.array(plan, { minLength: 2, maxLength: 3 }), fc.boolean(), fc.nat(50))
        .map(([plans, fresh, index]) => new Collide(plans, fresh, index)),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.nat(50), fc.array(refundAmount, { minLength: 2, maxLength: 4 })).map(([index, amounts]) => new RefundRace(index, amounts)),
    },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom<WorkerAction>('pause', 'pause', 'resume', 'resume', 'kill', 'crash_mid_job')
        .map((action) => new Worker(action)),
    },
    { weight: 1, arbitrary: fc.constant(new Sweep()) },
    { weight: 1, arbitrary: fc.constantFrom(200, 800, KNOBS.leaseMs + 200).map((ms) => new Wait(ms)) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom<'payment' | 'refund'>('payment', 'refund'), fc.nat(50), via).map(([k, i, v]) => new Read(k, i, v)) },
    { weight: 1, arbitrary: fc.tuple(fc.nat(200), via).map(([i, v]) => new RedeliverEvent(i, v)) },
    { weight: 1, arbitrary: fc.nat(50).map((index) => new ExpireKey(index)) },
  ];
  if (options.crashes) {
    arbitraries.push(
      { weight: 1, arbitrary: fc.tuple(point, plan).map(([pt, p]) => new CrashApi(pt, p)) },
      {
        weight: 1,
        arbitrary: fc.tuple(point, plan, fc.boolean(), fc.nat(2)).map(([pt, p, past, retries]) => new StallApi(pt, p, past, retries)),
      },
    );
  }
  return fc.oneof(...arbitraries);
}

/**
 * The end of every sequence: the worker decides everything left, every key
 * answers its request again through both APIs, now finally and byte for
 * byte the same, and the store and the provider agree with it all.
 */
export async function finishSequence(m: Model, r: Real): Promise<void> {
  const violations = new Violations();
  await drain(m, r, violations);
  for (const key of m.keys) {
    const current = key.current;
    if (!current) continue;
    for (const api of MAIN_APIS) {
      const [exchange] = await sendAll(r, [{ route: current.route, key: key.name, body: current.body, via: api }]);
      // The judge checks the bytes and the replay mark of a final answer; anything else is not final.
      if (exchange.kind !== 'answer' || (exchange.answer.status !== 201 && exchange.answer.status !== 402)) {
        violations.add('once the worker has run, the same request must replay its final answer', exchange);
      }
      m.judge([exchange], violations);
    }
  }
  await checkStore(m, r, violations, 'after the sequence, once the worker has run');
}
