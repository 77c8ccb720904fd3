import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type * as ClientLibrary from '../../client/src/index.js';
import type { CreateOptions, GiveUpInfo, PaymentCreateParams, PaymentsClient, RefundCreateParams } from '../../client/src/index.js';
import type { Random } from '../../test/support/random';
import { type Reply, ReplyRecorder } from '../../test/support/reply-recorder';
import type { ClientCalls, Exchange, RefundExchange } from './verdict';

/**
 * The chaos run's clients: a paced stream of payment operations, each made
 * by its merchant's PaymentsClient (the client library, one instance per
 * merchant, as a team runs it) under one key; a good share of the payments
 * that succeed are then refunded the same way. A call the client gives up
 * on is resumed with its key, as the library asks its users to, until it
 * ends or the operation's window does.
 */

/**
 * The provider's test tokens, weighted: mostly charges, with a good share of
 * lost and late replies, and some charges whose refunds fail, lose their
 * reply, answer late or stay pending a while.
 */
const TOKEN_MIX: readonly [token: string, weight: number][] = [
  ['pm_card_ok', 34],
  ['pm_card_declined', 10],
  ['pm_card_lost_response', 15],
  ['pm_card_timeout', 15],
  ['pm_card_flaky', 10],
  ['pm_card_pending', 10],
  ['pm_card_rate_limited', 4],
  ['pm_card_unavailable', 2],
  ['pm_card_refund_fails', 3],
  ['pm_card_refund_lost_response', 3],
  ['pm_card_refund_timeout', 3],
  ['pm_card_refund_pending', 3],
];

/** The tokens whose refunds misbehave: a payment made with one is always refunded, to exercise it. */
const REFUND_FAULT_TOKENS = new Set(['pm_card_refund_fails', 'pm_card_refund_lost_response', 'pm_card_refund_timeout', 'pm_card_refund_pending']);

/** Share of the other payments refunded once they succeed. */
const REFUND_SHARE = 0.35;

/**
 * How a succeeded payment is refunded:
 * - partial: one refund of part of it;
 * - in_turns: a part, then all that is left (no amount), then 1 more, which must be refused (400 amount_too_large);
 * - concurrent: two to four refunds at once under different keys, each of a quarter to 60 % of the payment,
 *   so that together they often ask for more than it: the API must refuse what does not fit.
 */
type RefundScenario = 'partial' | 'in_turns' | 'concurrent';

/** The refunds a payment will get if it succeeds, drawn with the payment: shares of its amount (undefined: all that is left). */
interface RefundPlan {
  scenario: RefundScenario;
  /** Each step's refunds, sent at once; steps one after another. */
  steps: (number | undefined)[][];
}

const CURRENCIES: readonly PaymentCreateParams['currency'][] = ['USD', 'EUR', 'GBP', 'JPY'];

/**
 * - single: one payment, one key;
 * - reuse_key: once answered, the same key again with another amount, which must be refused (422);
 * - double_submit: two keys for one order at once (a double click): at most one may be charged.
 */
type Scenario = 'single' | 'reuse_key' | 'double_submit';

export interface ChaosClient {
  id: string;
  apiKey: string;
}

interface Operation {
  index: number;
  scenario: Scenario;
  client: ChaosClient;
  body: PaymentCreateParams;
  /** The refunds of the payment, if it succeeds (for double_submit, of the one that does). */
  refunds?: RefundPlan;
}

/**
 * How each merchant's client is set up, and how long one operation (a
 * payment, a refund) may take, its resumptions after give-ups included.
 */
export interface ClientSettings {
  timeoutMs: number;
  maxRetries: number;
  /** Each call's deadline, never past the operation's window. */
  deadlineMs: number;
  backoff: { baseMs: number; capMs: number };
  windowMs: number;
}

/** Where and how the clients send: the APIs (behind a load balancer of the recorder's), the library, its settings. */
export interface Sender {
  library: typeof ClientLibrary;
  urls: readonly string[];
  settings: ClientSettings;
  /** The jitter and the API each attempt goes to. */
  random: Random;
}

/** What one run's clients sent, and what came back: every payment exchange and every refund exchange. */
export interface LoadResult {
  exchanges: Exchange[];
  refunds: RefundExchange[];
}

interface LoadPlan {
  operations: number;
  /** The operations start evenly over this long. */
  durationMs: number;
  /** At most this many operations in flight: an open-loop load with a bound. */
  concurrency: number;
}

function pick<T>(random: Random, weighted: readonly (readonly [T, number])[]): T {
  const total = weighted.reduce((sum, [, weight]) => sum + weight, 0);
  let roll = random() * total;
  for (const [value, weight] of weighted) {
    roll -= weight;
    if (roll < 0) return value;
  }
  return weighted[weighted.length - 1][0];
}

/** The operations of a run, drawn from `random` alone, so one seed gives one workload. */
export function planOperations(count: number, clients: readonly ChaosClient[], random: Random): Operation[] {
  return Array.from({ length: count }, (_, index) => {
    const scenario = pick<Scenario>(random, [
      ['single', 90],
      ['reuse_key', 5],
      ['double_submit', 5],
    ]);
    const withOrder = scenario === 'double_submit' || random() < 0.3;
    const client = clients[Math.floor(random() * clients.length)];
    const amount = 100 + Math.floor(random() * 99_900);
    const currency = CURRENCIES[Math.floor(random() * CURRENCIES.length)];
    const paymentMethod = pick(random, TOKEN_MIX);
    // Drawn for every operation, used or not, so the draws after it never depend on this one's.
    const refunds = planRefunds(random);
    const roll = random();
    // A key reuse refunds nothing: its second exchange is about the key, not the payment.
    const refunded = scenario !== 'reuse_key' && (REFUND_FAULT_TOKENS.has(paymentMethod) || roll < REFUND_SHARE);
    return {
      index,
      scenario,
      client,
      body: {
        amount,
        currency,
        payment_method: paymentMethod,
        ...(withOrder ? { order_id: `ord_chaos_${index}` } : {}),
        metadata: { chaos_op: String(index) },
      },
      ...(refunded ? { refunds } : {}),
    };
  });
}

/** A refund plan, as shares of the payment's amount; always the same number of draws. */
function planRefunds(random: Random): RefundPlan {
  const scenario = pick<RefundScenario>(random, [
    ['partial', 50],
    ['in_turns', 25],
    ['concurrent', 25],
  ]);
  const share = 0.1 + random() * 0.8;
  const concurrent = Array.from({ length: 4 }, () => 0.25 + random() * 0.35);
  const width = 2 + Math.floor(random() * 3);
  switch (scenario) {
    case 'partial':
      return { scenario, steps: [[share]] };
    case 'in_turns':
      return { scenario, steps: [[share], [undefined], [0]] };
    case 'concurrent':
      return { scenario, steps: [concurrent.slice(0, width)] };
  }
}

/** A share of a payment as a refund's amount: at least 1 (0 stands for exactly 1). */
function refundAmount(paymentAmount: number, share: number | undefined): number | undefined {
  return share === undefined ? undefined : Math.max(1, Math.floor(paymentAmount * share));
}

/**
 * A merchant's client, and what the run keeps of it: every attempt, through
 * the recorder, and every give-up onGiveUp was told of, by the error the
 * call rejected with.
 */
class Merchant {
  readonly client: PaymentsClient;
  private readonly giveUps = new Map<unknown, GiveUpInfo>();

  constructor(
    readonly id: string,
    apiKey: string,
    private readonly send: Sender,
    private readonly recorder: ReplyRecorder,
  ) {
    const { timeoutMs, maxRetries, deadlineMs, backoff } = send.settings;
    this.client = new send.library.PaymentsClient({
      baseUrl: send.urls[0],
      apiKey,
      timeoutMs,
      maxRetries,
      deadlineMs,
      backoff,
      random: send.random,
      fetch: recorder.fetch,
      onGiveUp: (info) => this.giveUps.set(info.lastError, info),
    });
  }

  /**
   * One operation under `key`: the call, and after each give-up that a later
   * call can end (not a refusal, not a payment in review) a wait of at least
   * the last answer's Retry-After and the call again with the same key, until
   * one ends or the window does. Every give-up is counted, and a rejection
   * onGiveUp was not told of is counted as silent.
   */
  async operate(key: string, call: (options: CreateOptions) => Promise<unknown>): Promise<ClientCalls & { replies: Reply[] }> {
    const { PendingAtDeadlineError, DeclineError, RefundFailedError, ApiError } = this.send.library;
    const replies = this.recorder.watch(key);
    const gaveUp: string[] = [];
    const ended = (how: { abandoned?: boolean; silent?: number } = {}) => ({ gaveUp, abandoned: false, silent: 0, ...how, replies });
    const windowEnds = Date.now() + this.send.settings.windowMs;
    try {
      for (;;) {
        const deadlineMs = Math.max(1, Math.min(this.send.settings.deadlineMs, windowEnds - Date.now()));
        const error = await call({ idempotencyKey: key, deadlineMs }).then(
          () => undefined,
          (rejected: unknown) => rejected,
        );
        // A decline or a failed refund is the operation's outcome, not a give-up.
        if (error === undefined || error instanceof DeclineError || error instanceof RefundFailedError) return ended();
        const info = this.giveUps.get(error);
        this.giveUps.delete(error);
        if (!info) return ended({ silent: 1 });
        gaveUp.push(info.reason);
        const inReview = error instanceof PendingAtDeadlineError && (error.payment ?? error.refund)?.status === 'requires_review';
        if (info.reason === 'not_retryable' || info.reason === 'aborted' || inReview) return ended();
        const waitMs = Math.max(RESUME_AFTER_MS, error instanceof ApiError ? (error.retryAfterMs ?? 0) : 0);
        if (waitMs >= windowEnds - Date.now()) return ended({ abandoned: true });
        await delay(waitMs);
      }
    } finally {
      this.recorder.unwatch(key);
    }
  }
}

/**
 * The least wait before a given-up operation is resumed: what the API's
 * Retry-After asks while its database is down, and a give-up for want of
 * retry budget carries no Retry-After of its own.
 */
const RESUME_AFTER_MS = 1_000;

/**
 * Runs the operations, the i-th starting no earlier than i·durationMs/count
 * after the start, and resolves with every exchange once all have ended.
 */
export async function runLoad(
  operations: readonly Operation[],
  plan: LoadPlan,
  send: Sender,
  onDone: (finished: number) => void = () => undefined,
): Promise<LoadResult> {
  const recorder = new ReplyRecorder({ urls: send.urls, random: send.random });
  const merchants = new Map<string, Merchant>();
  const merchantOf = (client: ChaosClient) => {
    let merchant = merchants.get(client.id);
    if (!merchant) merchants.set(client.id, (merchant = new Merchant(client.id, client.apiKey, send, recorder)));
    return merchant;
  };
  const exchanges: Exchange[] = [];
  const refunds: RefundExchange[] = [];
  const started = Date.now();
  const gapMs = plan.durationMs / Math.max(1, operations.length);
  let next = 0;
  let finished = 0;
  const runner = async () => {
    for (let i = next++; i < operations.length; i = next++) {
      const wait = started + i * gapMs - Date.now();
      if (wait > 0) await delay(wait);
      const merchant = merchantOf(operations[i].client);
      const paid = await runOperation(operations[i], merchant);
      exchanges.push(...paid);
      refunds.push(...(await runRefunds(operations[i], paid, merchant)));
      onDone(++finished);
    }
  };
  await Promise.all(Array.from({ length: Math.min(plan.concurrency, operations.length) }, runner));
  return { exchanges, refunds };
}

/**
 * The operation's refunds, once its payment succeeded (a 201 it was told):
 * each refund is made by the merchant's client under its own key, steps one
 * after another and the refunds of a step at once.
 */
async function runRefunds(op: Operation, paid: readonly Exchange[], merchant: Merchant): Promise<RefundExchange[]> {
  if (!op.refunds) return [];
  const succeeded = paid.flatMap((exchange) => {
    const last = exchange.replies.at(-1);
    return !exchange.reuse && last?.kind === 'http' && last.status === 201 && last.paymentId ? [last.paymentId] : [];
  });
  if (succeeded.length === 0) return [];
  const paymentId = succeeded[0];
  const paymentAmount = op.body.amount;
  const done: RefundExchange[] = [];
  for (const step of op.refunds.steps) {
    done.push(
      ...(await Promise.all(
        step.map(async (share): Promise<RefundExchange> => {
          const amount = refundAmount(paymentAmount, share);
          const params: RefundCreateParams = { payment: paymentId, ...(amount === undefined ? {} : { amount }), metadata: { chaos_op: String(op.index) } };
          const key = randomUUID();
          const calls = await merchant.operate(key, (options) => merchant.client.refunds.create(params, options));
          return { clientId: op.client.id, key, paymentId, paymentAmount, scenario: op.refunds!.scenario, ...calls };
        }),
      )),
    );
  }
  return done;
}

async function runOperation(op: Operation, merchant: Merchant): Promise<Exchange[]> {
  const pay = async (key: string, params: PaymentCreateParams, reuse = false): Promise<Exchange> => {
    const calls = await merchant.operate(key, (options) => merchant.client.payments.create(params, options));
    return { clientId: op.client.id, key, reuse, ...calls };
  };
  const { body } = op;

  switch (op.scenario) {
    case 'single':
      return [await pay(randomUUID(), body)];
    case 'double_submit':
      return Promise.all([pay(randomUUID(), body), pay(randomUUID(), body)]);
    case 'reuse_key': {
      const first = await pay(randomUUID(), body);
      // Only a key the API accepted is bound to its first body; a key it never saw would be a new payment.
      const accepted = first.replies.some((reply) => reply.kind === 'http' && reply.paymentId !== undefined);
      if (!accepted) return [first];
      return [first, await pay(first.key, { ...body, amount: body.amount + 1 }, true)];
    }
  }
}
