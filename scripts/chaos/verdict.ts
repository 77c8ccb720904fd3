import type { AuditReport, Example } from '../lib/ledger-audit';
import { CLIENT_TIMEOUT_ERROR, type HttpReply, type Reply } from '../../test/support/reply-recorder';
import type { Receipt } from '../../test/support/webhook-receiver';
import type { EventResource } from '../../src/merchant-events/event';
import type { EventType } from '../../src/ledger/outbox';
import type { OperationStatus } from '../../src/ledger/operation';
import type { PaymentStatus } from '../../src/ledger/payments.table';

/**
 * The chaos run's judgement, as a pure function: what the clients were told,
 * what the database and the provider hold at the end, and the ledger audit in;
 * the one summary line out. Every count under `violations` must be zero, and
 * so must every count CLEAN_VERDICT names.
 */

/**
 * How the client library's calls of one operation ended: the operation is
 * resumed with its key after each give-up that a later call can end.
 */
export interface ClientCalls {
  /** onGiveUp's reason for each call that gave up, in order. */
  gaveUp: readonly string[];
  /** The last call gave up, outcome unknown, and the operation's window ended before it could be resumed. */
  abandoned: boolean;
  /** Calls that rejected with no final answer and no word to onGiveUp. */
  silent: number;
}

/** Everything one client sent under one key, and what came back. */
export interface Exchange extends ClientCalls {
  clientId: string;
  key: string;
  replies: readonly Reply[];
  /** A deliberate reuse of a settled key with another body: its only right answer is 422. */
  reuse: boolean;
}

/** Everything one client sent under one key to refund one of its payments, and what came back. */
export interface RefundExchange extends ClientCalls {
  clientId: string;
  key: string;
  /** The payment refunded, and its amount: what the refunds of it may add up to at most. */
  paymentId: string;
  paymentAmount: number;
  /** How the payment was refunded (see load.ts), for the examples. */
  scenario: string;
  replies: readonly Reply[];
}

/** A refund at the end. */
export interface FinalRefund {
  id: string;
  paymentId: string;
  amount: number;
  status: OperationStatus;
}

/** A refund's idempotency key row. */
export interface RefundKeyRow {
  clientId: string;
  key: string;
  refundId: string;
}

export interface FinalPayment {
  id: string;
  status: PaymentStatus;
  /** From created_at to its last status event (its updated_at, but for a refund of it since): how long it took to become terminal. */
  msToTerminal: number;
}

export interface KeyRow {
  clientId: string;
  key: string;
  paymentId: string;
}

/** A payment (or a refund) at the end and its client: the one whose endpoint its events must reach. */
export interface OwnedPayment {
  id: string;
  clientId: string;
  status: PaymentStatus;
}

/** A row of the events table: one status change of one payment, or of one refund. */
export interface EventRow {
  id: string;
  clientId: string;
  type: EventType;
  /** The payment it announces; null for a refund's event. */
  paymentId: string | null;
  /** The refund it announces, if it is a refund's. */
  refundId?: string | null;
  /** created_at (epoch ms): the start of the transaction that committed the change. */
  createdAtMs: number;
}

/** Every request one client's webhook endpoint received. */
export interface EndpointReceipts {
  clientId: string;
  receipts: readonly Receipt[];
}

/** What the database says was announced, and what the merchants' endpoints got. */
export interface MerchantEventsInput {
  payments: readonly OwnedPayment[];
  refunds: readonly OwnedPayment[];
  events: readonly EventRow[];
  endpoints: readonly EndpointReceipts[];
}

/** One time Postgres was down: from the stop until it accepted connections again (epoch ms). */
export interface Outage {
  fromMs: number;
  toMs: number;
  /** From the server back to every API ready again; null when they were not within the run's deadline. */
  recoveryMs: number | null;
}

interface VerdictInput {
  exchanges: readonly Exchange[];
  payments: readonly FinalPayment[];
  keys: readonly KeyRow[];
  audit: AuditReport;
  outages: readonly Outage[];
  /** APIs and workers that exited without being killed: no fault may bring one down. */
  unexpectedExits: number;
  /**
   * Payments still pending when the drain's deadline passed, read then: the
   * reconciliation ladder must have settled every one by then, so a payment
   * settled only later (during the events' wait) still counts.
   */
  pendingAfterDrain: readonly string[];
  merchantEvents: MerchantEventsInput;
  /** What the refunding clients sent and were told. */
  refundExchanges: readonly RefundExchange[];
  /** The refunds table at the end, and the keys of refunds. */
  refunds: readonly FinalRefund[];
  refundKeys: readonly RefundKeyRow[];
  /** Refunds still pending or in review when the drain ended: every refund must be final by then. */
  refundsUndecidedAfterDrain: readonly string[];
  maxExamples: number;
}

interface Verdict {
  requests: number;
  payments: number;
  charges: number;
  double_charges: number;
  orphan_charges: number;
  lost: number;
  /** Pending at the end of the run. */
  non_terminal: number;
  /** Pending when the drain's deadline passed: the reconciliation ladder left them open. */
  pending_after_drain: number;
  max_ms_to_terminal: number;
  requires_review: number;
  /** Of those, the ones whose charge succeeded after all: a person will refund or confirm them. */
  requires_review_charged: number;
  /** Rows of the events table: status changes announced. */
  events: number;
  /** An event that never got a 2xx at its client's endpoint, or a final status no event announces. */
  events_missing: number;
  /** One status change (payment and event type) received under more than one webhook-id. */
  events_split: number;
  /** From an event's commit to its first 2xx at the endpoint. */
  webhook_latency_ms: { p50: number | null; p99: number | null };
  /**
   * What the endpoints received, answers by status ('held': left unanswered
   * past the send's timeout), and duplicates: a 2xx for a webhook-id that had
   * one already. At least once allows them; the webhook-id lets the merchant drop them.
   */
  webhook_receipts: { total: number; duplicates: number; answers: Record<string, number> };
  /** Refunds made (rows of the refunds table). */
  refunds: number;
  /**
   * A refund given twice: by the audit, one refund the provider made more
   * than once (or two under one provider key); by the clients, one key that
   * named two refunds, both not failed.
   */
  double_refunds: number;
  /** Provider refunds that belong to no refund of ours (the audit's orphan_refund). */
  orphan_refunds: number;
  /**
   * More given back than taken: by the audit, a payment whose refunds not
   * failed, or a charge whose provider refunds not failed, sum above its
   * amount; by the clients, a payment whose refunds answered 201 do.
   */
  over_refunds: number;
  /** A refund named to a client (201, 402, 202) that the database does not have, or a 201 whose refund did not end succeeded. */
  lost_refunds: number;
  /** Refunds still pending or in review when the drain ended. */
  non_terminal_refunds: number;
  refunds_by_status: Record<OperationStatus, number>;
  /**
   * Calls of the client library that gave up (payments and refunds), by
   * onGiveUp's reason: not_retryable for an answer the same request would get
   * again (a reused key's 422, a refund past what is left), the others
   * resumed with the operation's key.
   */
  given_up: Record<string, number>;
  /**
   * Operations (payments and refunds) whose client was left without a final
   * answer at the end of the operation's window. Not a violation in itself:
   * the ledger must still settle them (non_terminal), and their merchants
   * learn it from the events.
   */
  abandoned: number;
  /** No violation of any kind. */
  ok: boolean;
  by_status: Record<PaymentStatus, number>;
  /** Answers the payment clients received, by status (and error code), and network failures by cause. */
  answers: Record<string, number>;
  /** Answers the refund clients received, likewise. */
  refund_answers: Record<string, number>;
  /** What the clients (paying and refunding) saw while Postgres was down: the requests in flight at any time of an outage. */
  postgres_outages: {
    count: number;
    down_ms: number;
    max_recovery_ms: number;
    requests: number;
    answers: Record<string, number>;
  };
  /** Further checks, zero when all is well. */
  violations: {
    /**
     * A final answer the ledger disagrees with, or a key that maps to another
     * payment (or refund) than the one it named, or a refund of another payment than the one asked.
     */
    contradicted: number;
    /** A key reused with another body that was not refused with 422. */
    reuse_not_refused: number;
    /** 500s: a failure the service did not understand. */
    server_errors: number;
    /** Violations of the ledger audit, by kind (double and orphan charges are counted above too). */
    audit: number;
    /**
     * Requests sent while Postgres was down that got no answer within the
     * client's timeout: a 503 takes milliseconds. (Requests already in flight
     * when it stopped may be slow for other reasons, in the provider's call
     * on a busy machine: their answers are counted under postgres_outages.)
     */
    hangs: number;
    /** Postgres outages after which the APIs were not ready again within the deadline. */
    not_recovered: number;
    /** APIs and workers that exited on their own (their last lines are in the progress log). */
    unexpected_exits: number;
    /** Receipts whose Standard Webhooks signature did not verify with the endpoint's client's secret. */
    events_unverified: number;
    /** Receipts at an endpoint about a payment of another client, or about none. */
    events_foreign: number;
    /** Client calls that rejected without a final answer and without telling onGiveUp: a give-up nobody hears of. */
    silent_give_ups: number;
  };
  examples?: Record<string, Example[]>;
}

/**
 * The counts of a run where nothing went wrong: ok, and every one zero. The
 * specs hold a run's verdict to it (toMatchObject); a new kind of violation
 * fails to compile here until it is added.
 */
export const CLEAN_VERDICT = {
  ok: true,
  double_charges: 0,
  orphan_charges: 0,
  lost: 0,
  non_terminal: 0,
  // None left open by the reconciliation ladder when the drain ended, poisoned answers included.
  pending_after_drain: 0,
  events_missing: 0,
  events_split: 0,
  double_refunds: 0,
  orphan_refunds: 0,
  over_refunds: 0,
  lost_refunds: 0,
  non_terminal_refunds: 0,
  violations: {
    contradicted: 0,
    reuse_not_refused: 0,
    server_errors: 0,
    audit: 0,
    hangs: 0,
    not_recovered: 0,
    unexpected_exits: 0,
    events_unverified: 0,
    events_foreign: 0,
    silent_give_ups: 0,
  },
} as const satisfies Partial<Verdict>;

/**
 * What a final answer promised: the status it told, and the statuses the
 * ledger may hold for that payment afterwards. succeeded and failed never
 * change; review is not an end (a provider event or a re-check may settle it).
 */
function statusPromised(reply: HttpReply): { told: PaymentStatus; allowed: readonly PaymentStatus[] } | undefined {
  if (reply.status === 201) return { told: 'succeeded', allowed: ['succeeded'] };
  if (reply.status === 402) return { told: 'failed', allowed: ['failed'] };
  if (reply.status === 202 && reply.paymentStatus === 'requires_review') {
    return { told: 'requires_review', allowed: ['requires_review', 'succeeded', 'failed'] };
  }
  return undefined;
}

function label(reply: Reply): string {
  return reply.kind === 'http' ? `${reply.status}${reply.code ? ` ${reply.code}` : ''}` : `network ${reply.error}`;
}

const CLIENT_TIMEOUT = `network ${CLIENT_TIMEOUT_ERROR}`;

/** 201, 402 and 202 name a payment that exists: the API committed it before answering. */
function namesPayment(reply: Reply): reply is HttpReply & { paymentId: string } {
  return reply.kind === 'http' && [201, 202, 402].includes(reply.status) && reply.paymentId !== undefined;
}

/** Likewise for a refund. */
function namesRefund(reply: Reply): reply is HttpReply & { refundId: string } {
  return reply.kind === 'http' && [201, 202, 402].includes(reply.status) && reply.refundId !== undefined;
}

export function judge(input: VerdictInput): Verdict {
  const examples: Record<string, Example[]> = {};
  const note = (kind: string, example: Example) => {
    const list = (examples[kind] ??= []);
    if (list.length < input.maxExamples) list.push(example);
  };

  const paymentById = new Map(input.payments.map((payment) => [payment.id, payment]));
  const keyRow = new Map(input.keys.map((row) => [`${row.clientId}/${row.key}`, row]));
  const answers: Record<string, number> = {};
  const outageAnswers: Record<string, number> = {};
  const duringOutage = (reply: Reply) => input.outages.some((o) => reply.at <= o.toMs && reply.at + reply.ms >= o.fromMs);
  const sentWhileDown = (reply: Reply) => input.outages.some((o) => reply.at >= o.fromMs && reply.at <= o.toMs);
  let requests = 0;
  let outageRequests = 0;
  let hangs = 0;
  let lost = 0;
  let contradicted = 0;
  let reuseNotRefused = 0;
  let serverErrors = 0;
  let keysChargedTwice = 0;
  const givenUp: Record<string, number> = {};
  let abandoned = 0;
  let silentGiveUps = 0;
  /** Counts one exchange's requests and answers, under `tally`, what happened during outages, and how its calls ended. */
  const countReplies = (operation: 'payment' | 'refund', exchange: ClientCalls & { key: string; replies: readonly Reply[] }, tally: Record<string, number>) => {
    const { key, replies } = exchange;
    for (const reason of exchange.gaveUp) givenUp[reason] = (givenUp[reason] ?? 0) + 1;
    if (exchange.abandoned) {
      abandoned++;
      note('abandoned', { operation, key, gave_up: exchange.gaveUp.join(',') });
    }
    if (exchange.silent > 0) {
      silentGiveUps += exchange.silent;
      note('silent_give_ups', { operation, key });
    }
    requests += replies.length;
    for (const reply of replies) {
      const answer = label(reply);
      tally[answer] = (tally[answer] ?? 0) + 1;
      if (reply.kind === 'http' && reply.status === 500) serverErrors++;
      if (duringOutage(reply)) {
        outageRequests++;
        outageAnswers[answer] = (outageAnswers[answer] ?? 0) + 1;
        if (answer === CLIENT_TIMEOUT && sentWhileDown(reply)) {
          hangs++;
          note('hangs', { operation, key, sent_at: new Date(reply.at).toISOString(), waited_ms: reply.ms });
        }
      }
    }
  };

  for (const exchange of input.exchanges) {
    countReplies('payment', exchange, answers);
    const last = exchange.replies.at(-1);
    if (exchange.reuse) {
      if (last?.kind !== 'http' || last.status !== 422) {
        reuseNotRefused++;
        note('reuse_not_refused', { key: exchange.key, answer: last?.kind === 'http' ? last.status : (last?.error ?? null) });
      }
      continue;
    }

    const named = new Set(exchange.replies.filter(namesPayment).map((reply) => reply.paymentId));
    for (const paymentId of named) {
      if (!paymentById.has(paymentId)) {
        lost++;
        note('lost', { key: exchange.key, payment_id: paymentId, why: 'named to the client, missing from the ledger' });
      }
    }
    if (named.size > 0) {
      const row = keyRow.get(`${exchange.clientId}/${exchange.key}`);
      if (!row || !paymentById.has(row.paymentId)) {
        lost++;
        note('lost', { key: exchange.key, payment_id: row?.paymentId ?? null, why: 'accepted key without its payment' });
      } else if (!named.has(row.paymentId) || named.size > 1) {
        contradicted++;
        note('contradicted', { key: exchange.key, payment_id: row.paymentId, named: [...named].join(',') });
      }
    }
    const charged = [...named].filter((id) => paymentById.get(id)?.status === 'succeeded');
    if (charged.length > 1) {
      keysChargedTwice++;
      note('key_charged_twice', { key: exchange.key, payments: charged.join(',') });
    }

    const final = last?.kind === 'http' ? last : undefined;
    const promised = final && statusPromised(final);
    const actual = final?.paymentId ? paymentById.get(final.paymentId)?.status : undefined;
    if (promised && actual && !promised.allowed.includes(actual)) {
      contradicted++;
      note('contradicted', { key: exchange.key, payment_id: final!.paymentId!, told: promised.told, ledger: actual });
    }
  }

  const refundAnswers: Record<string, number> = {};
  const refunds = judgeRefunds(input, note, (exchange) => countReplies('refund', exchange, refundAnswers));
  contradicted += refunds.contradicted;

  const byStatus: Record<PaymentStatus, number> = { pending: 0, succeeded: 0, failed: 0, requires_review: 0 };
  let maxMsToTerminal = 0;
  for (const payment of input.payments) {
    byStatus[payment.status]++;
    if (payment.status !== 'pending') maxMsToTerminal = Math.max(maxMsToTerminal, payment.msToTerminal);
  }

  const { violations: audited } = input.audit;
  for (const [kind, found] of Object.entries(audited)) {
    if (found.examples.length > 0) examples[`audit ${kind}`] = found.examples.slice(0, input.maxExamples);
  }
  for (const paymentId of input.pendingAfterDrain) note('pending_after_drain', { payment_id: paymentId });
  const auditViolations = Object.values(audited).reduce((sum, found) => sum + found.count, 0);
  const doubleCharges = audited.double_charge.count + audited.order_charged_twice.count + keysChargedTwice;
  const doubleRefunds = audited.double_refund.count + refunds.keysRefundedTwice;
  const overRefunds = audited.over_refund.count + refunds.toldOverRefunded;
  for (const refundId of input.refundsUndecidedAfterDrain) note('non_terminal_refunds', { refund_id: refundId });
  const merchantEvents = judgeMerchantEvents(input.merchantEvents, note);
  const violations = {
    contradicted,
    reuse_not_refused: reuseNotRefused,
    server_errors: serverErrors,
    audit: auditViolations,
    hangs,
    not_recovered: input.outages.filter((outage) => outage.recoveryMs === null).length,
    unexpected_exits: input.unexpectedExits,
    events_unverified: merchantEvents.unverified,
    events_foreign: merchantEvents.foreign,
    silent_give_ups: silentGiveUps,
  };
  const verdict: Verdict = {
    requests,
    payments: input.payments.length,
    charges: input.audit.charges.total,
    double_charges: doubleCharges,
    orphan_charges: audited.orphan_charge.count,
    lost,
    non_terminal: byStatus.pending,
    pending_after_drain: input.pendingAfterDrain.length,
    max_ms_to_terminal: Math.round(maxMsToTerminal),
    requires_review: byStatus.requires_review,
    requires_review_charged: input.audit.requires_review_charged,
    events: input.merchantEvents.events.length,
    events_missing: merchantEvents.missing,
    events_split: merchantEvents.split,
    webhook_latency_ms: merchantEvents.latencyMs,
    webhook_receipts: merchantEvents.receipts,
    refunds: input.refunds.length,
    double_refunds: doubleRefunds,
    orphan_refunds: audited.orphan_refund.count,
    over_refunds: overRefunds,
    lost_refunds: refunds.lost,
    non_terminal_refunds: input.refundsUndecidedAfterDrain.length,
    refunds_by_status: refunds.byStatus,
    given_up: givenUp,
    abandoned,
    ok:
      doubleCharges === 0 &&
      doubleRefunds === 0 &&
      audited.orphan_refund.count === 0 &&
      overRefunds === 0 &&
      refunds.lost === 0 &&
      input.refundsUndecidedAfterDrain.length === 0 &&
      audited.orphan_charge.count === 0 &&
      lost === 0 &&
      byStatus.pending === 0 &&
      input.pendingAfterDrain.length === 0 &&
      merchantEvents.missing === 0 &&
      merchantEvents.split === 0 &&
      Object.values(violations).every((count) => count === 0),
    by_status: byStatus,
    answers,
    refund_answers: refundAnswers,
    postgres_outages: {
      count: input.outages.length,
      down_ms: input.outages.reduce((sum, outage) => sum + outage.toMs - outage.fromMs, 0),
      max_recovery_ms: Math.max(0, ...input.outages.map((outage) => outage.recoveryMs ?? 0)),
      requests: outageRequests,
      answers: outageAnswers,
    },
    violations,
  };
  if (Object.keys(examples).length > 0) verdict.examples = examples;
  return verdict;
}

/**
 * What the refunding clients were told against what the ledger holds at the
 * end: every refund named to a client exists, under the key that named it
 * and for the payment asked; a 201 ended succeeded and a 402 failed; one key
 * never gave two refunds; and the refunds a client was told succeeded never
 * add up to more than the payment.
 */
function judgeRefunds(
  input: VerdictInput,
  note: (kind: string, example: Example) => void,
  countReplies: (exchange: RefundExchange) => void,
) {
  const refundById = new Map(input.refunds.map((refund) => [refund.id, refund]));
  const keyRow = new Map(input.refundKeys.map((row) => [`${row.clientId}/${row.key}`, row]));
  const toldRefunded = new Map<string, { amount: number; refunded: number; refunds: string[] }>();
  let lost = 0;
  let contradicted = 0;
  let keysRefundedTwice = 0;

  for (const exchange of input.refundExchanges) {
    countReplies(exchange);
    const named = new Set(exchange.replies.filter(namesRefund).map((reply) => reply.refundId));
    for (const refundId of named) {
      if (!refundById.has(refundId)) {
        lost++;
        note('lost_refunds', { key: exchange.key, refund_id: refundId, why: 'named to the client, missing from the ledger' });
      }
    }
    if (named.size > 0) {
      const row = keyRow.get(`${exchange.clientId}/${exchange.key}`);
      if (!row || !refundById.has(row.refundId)) {
        lost++;
        note('lost_refunds', { key: exchange.key, refund_id: row?.refundId ?? null, why: 'accepted key without its refund' });
      } else if (!named.has(row.refundId) || named.size > 1) {
        contradicted++;
        note('contradicted', { key: exchange.key, refund_id: row.refundId, named: [...named].join(',') });
      }
    }
    const given = [...named].filter((id) => refundById.has(id) && refundById.get(id)!.status !== 'failed');
    if (given.length > 1) {
      keysRefundedTwice++;
      note('key_refunded_twice', { key: exchange.key, refunds: given.join(',') });
    }

    const last = exchange.replies.at(-1);
    const final = last?.kind === 'http' && last.refundId !== undefined ? last : undefined;
    const refund = final && refundById.get(final.refundId!);
    if (!final || !refund) continue;
    if (refund.paymentId !== exchange.paymentId) {
      contradicted++;
      note('contradicted', { key: exchange.key, refund_id: refund.id, asked: exchange.paymentId, ledger: refund.paymentId });
    }
    if (final.status === 201) {
      if (refund.status !== 'succeeded') {
        lost++;
        note('lost_refunds', { key: exchange.key, refund_id: refund.id, why: `answered 201, ${refund.status} in the ledger` });
      }
      const told = toldRefunded.get(exchange.paymentId) ?? { amount: exchange.paymentAmount, refunded: 0, refunds: [] };
      told.refunded += final.amount ?? refund.amount;
      told.refunds.push(refund.id);
      toldRefunded.set(exchange.paymentId, told);
    } else if (final.status === 402 && refund.status !== 'failed') {
      contradicted++;
      note('contradicted', { key: exchange.key, refund_id: refund.id, told: 'failed', ledger: refund.status });
    }
  }

  let toldOverRefunded = 0;
  for (const [paymentId, told] of toldRefunded) {
    if (told.refunded <= told.amount) continue;
    toldOverRefunded++;
    note('over_refunds', { payment_id: paymentId, amount: told.amount, told_refunded: told.refunded, refunds: told.refunds.join(',') });
  }
  const byStatus: Record<OperationStatus, number> = { pending: 0, succeeded: 0, failed: 0, requires_review: 0 };
  for (const refund of input.refunds) byStatus[refund.status]++;
  return { lost, contradicted, keysRefundedTwice, toldOverRefunded, byStatus };
}

const is2xx = (receipt: Receipt) => typeof receipt.answer === 'number' && receipt.answer >= 200 && receipt.answer < 300;
const receivedKey = (clientId: string, webhookId: string) => `${clientId} ${webhookId}`;

/**
 * When each webhook-id first got a 2xx, by endpoint (receipts are kept in
 * arrival order): an event counts as delivered only at its own client's.
 */
function firstDeliveries(endpoints: readonly EndpointReceipts[]): Map<string, number> {
  const first = new Map<string, number>();
  for (const endpoint of endpoints) {
    for (const receipt of endpoint.receipts) {
      const key = receivedKey(endpoint.clientId, receipt.webhookId);
      if (is2xx(receipt) && !first.has(key)) first.set(key, receipt.at);
    }
  }
  return first;
}

/** The payment or refund an event announces, named as an example names it. */
function subjectOf(event: EventRow): Example {
  return event.refundId ? { refund_id: event.refundId } : { payment_id: event.paymentId };
}

/**
 * What the merchants were never told: events with no 2xx at their client's
 * endpoint, and final payments and refunds whose status no event announces (a
 * change committed without its event). Empty is also the end of the chaos run's wait.
 */
export function missingEvents(input: MerchantEventsInput): Example[] {
  const delivered = firstDeliveries(input.endpoints);
  const missing: Example[] = [];
  for (const event of input.events) {
    if (!delivered.has(receivedKey(event.clientId, event.id))) {
      missing.push({ event_id: event.id, ...subjectOf(event), type: event.type, why: 'no 2xx at its endpoint' });
    }
  }
  const announced = new Set(input.events.map((event) => `${event.refundId ?? event.paymentId} ${event.type}`));
  const rows = [
    ...input.payments.map((row) => ({ row, object: 'payment', idField: 'payment_id' })),
    ...input.refunds.map((row) => ({ row, object: 'refund', idField: 'refund_id' })),
  ];
  for (const { row, object, idField } of rows) {
    const type = `${object}.${row.status}`;
    if (row.status !== 'pending' && !announced.has(`${row.id} ${type}`)) {
      missing.push({ event_id: null, [idField]: row.id, type, why: 'no event announces its status' });
    }
  }
  return missing;
}

/** The nearest-rank percentile of ascending `sorted`, rounded to the millisecond. */
function percentile(sorted: readonly number[], share: number): number | null {
  if (sorted.length === 0) return null;
  return Math.round(sorted[Math.max(0, Math.ceil(share * sorted.length) - 1)]);
}

/** The payment (or refund) and type a received body announces, or undefined for a body that is no event. */
function announcedBy(body: string): { objectId: string; type: string } | undefined {
  try {
    const event = JSON.parse(body) as Partial<EventResource>;
    const objectId = event.data?.object?.id;
    return typeof objectId === 'string' && typeof event.type === 'string' ? { objectId, type: event.type } : undefined;
  } catch {
    return undefined;
  }
}

function judgeMerchantEvents(input: MerchantEventsInput, note: (kind: string, example: Example) => void) {
  const missing = missingEvents(input);
  for (const example of missing) note('events_missing', example);

  const delivered = firstDeliveries(input.endpoints);
  const latencies = input.events
    .flatMap((event) => {
      const at = delivered.get(receivedKey(event.clientId, event.id));
      return at === undefined ? [] : [at - event.createdAtMs];
    })
    .sort((a, b) => a - b);

  const ownerOf = new Map([...input.payments, ...input.refunds].map((row) => [row.id, row.clientId]));
  const webhookIdsByChange = new Map<string, Set<string>>();
  const answers: Record<string, number> = {};
  const acknowledged = new Set<string>();
  let total = 0;
  let duplicates = 0;
  let unverified = 0;
  let foreign = 0;
  for (const endpoint of input.endpoints) {
    for (const receipt of endpoint.receipts) {
      total++;
      answers[String(receipt.answer)] = (answers[String(receipt.answer)] ?? 0) + 1;
      const key = receivedKey(endpoint.clientId, receipt.webhookId);
      if (is2xx(receipt)) {
        if (acknowledged.has(key)) duplicates++;
        acknowledged.add(key);
      }
      if (!receipt.verified) {
        unverified++;
        note('events_unverified', { client_id: endpoint.clientId, webhook_id: receipt.webhookId });
      }
      const change = announcedBy(receipt.body);
      const owner = change && ownerOf.get(change.objectId);
      if (owner !== endpoint.clientId) {
        foreign++;
        note('events_foreign', {
          client_id: endpoint.clientId,
          webhook_id: receipt.webhookId,
          payment_id: change?.objectId ?? null,
          owner: owner ?? null,
        });
      }
      if (change) {
        const changeKey = `${change.objectId} ${change.type}`;
        webhookIdsByChange.set(changeKey, (webhookIdsByChange.get(changeKey) ?? new Set()).add(receipt.webhookId));
      }
    }
  }
  let split = 0;
  for (const [change, webhookIds] of webhookIdsByChange) {
    if (webhookIds.size < 2) continue;
    split++;
    note('events_split', { change, webhook_ids: [...webhookIds].join(',') });
  }

  return {
    missing: missing.length,
    split,
    unverified,
    foreign,
    latencyMs: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) },
    receipts: { total, duplicates, answers },
  };
}
