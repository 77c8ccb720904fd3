import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Random } from '../../test/support/random';
import { type PayRequest, type PayResult, type ClientRetryPolicy, payWithRetries } from '../../test/support/payment-client';
import type { Exchange } from './verdict';

/**
 * The chaos run's clients: a paced stream of payment operations, each sent by
 * a careful client (test/support/payment-client.ts) that retries with the same key.
 */

/** The provider's test tokens, weighted: mostly charges, with a good share of lost and late replies. */
const TOKEN_MIX: readonly [token: string, weight: number][] = [
  ['pm_card_ok', 34],
  ['pm_card_declined', 10],
  ['pm_card_lost_response', 15],
  ['pm_card_timeout', 15],
  ['pm_card_flaky', 10],
  ['pm_card_pending', 10],
  ['pm_card_rate_limited', 4],
  ['pm_card_unavailable', 2],
];

const CURRENCIES = ['USD', 'EUR', 'GBP', 'JPY'];

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
  body: Record<string, unknown>;
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
    return {
      index,
      scenario,
      client: clients[Math.floor(random() * clients.length)],
      body: {
        amount: 100 + Math.floor(random() * 99_900),
        currency: CURRENCIES[Math.floor(random() * CURRENCIES.length)],
        payment_method: pick(random, TOKEN_MIX),
        ...(withOrder ? { order_id: `ord_chaos_${index}` } : {}),
        metadata: { chaos_op: String(index) },
      },
    };
  });
}

/**
 * Runs the operations, the i-th starting no earlier than i·durationMs/count
 * after the start, and resolves with every exchange once all have ended.
 */
export async function runLoad(
  operations: readonly Operation[],
  plan: LoadPlan,
  send: { urls: readonly string[]; policy: ClientRetryPolicy },
  onDone: (finished: number) => void = () => undefined,
): Promise<Exchange[]> {
  const exchanges: Exchange[] = [];
  const started = Date.now();
  const gapMs = plan.durationMs / Math.max(1, operations.length);
  let next = 0;
  let finished = 0;
  const runner = async () => {
    for (let i = next++; i < operations.length; i = next++) {
      const wait = started + i * gapMs - Date.now();
      if (wait > 0) await delay(wait);
      exchanges.push(...(await runOperation(operations[i], send)));
      onDone(++finished);
    }
  };
  await Promise.all(Array.from({ length: Math.min(plan.concurrency, operations.length) }, runner));
  return exchanges;
}

async function runOperation(
  op: Operation,
  send: { urls: readonly string[]; policy: ClientRetryPolicy },
): Promise<Exchange[]> {
  const request = (key: string, body: Record<string, unknown>): PayRequest => ({
    urls: send.urls,
    apiKey: op.client.apiKey,
    key,
    body,
  });
  const exchange = (result: PayResult, reuse = false): Exchange => ({
    clientId: op.client.id,
    key: result.key,
    replies: result.replies,
    reuse,
  });

  switch (op.scenario) {
    case 'single':
      return [exchange(await payWithRetries(request(randomUUID(), op.body), send.policy))];
    case 'double_submit': {
      const both = await Promise.all([
        payWithRetries(request(randomUUID(), op.body), send.policy),
        payWithRetries(request(randomUUID(), op.body), send.policy),
      ]);
      return both.map((result) => exchange(result));
    }
    case 'reuse_key': {
      const first = await payWithRetries(request(randomUUID(), op.body), send.policy);
      // Only a key the API accepted is bound to its first body; a key it never saw would be a new payment.
      const accepted = first.replies.some((reply) => reply.kind === 'http' && reply.paymentId !== undefined);
      if (!accepted) return [exchange(first)];
      const changed = { ...op.body, amount: (op.body.amount as number) + 1 };
      return [exchange(first), exchange(await payWithRetries(request(first.key, changed), send.policy), true)];
    }
  }
}
