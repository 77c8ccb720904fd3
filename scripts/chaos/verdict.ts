import type { AuditReport, Example } from '../lib/ledger-audit';
import type { HttpReply, Reply } from '../lib/payment-client';
import type { PaymentStatus } from '../../src/payments/payment';

/**
 * The chaos run's judgement, as a pure function: what the clients were told,
 * what the database and the provider hold at the end, and the ledger audit in;
 * the one summary line out. Every count under `violations` must be zero.
 */

/** Everything one client sent under one key, and what came back. */
export interface Exchange {
  clientId: string;
  key: string;
  replies: readonly Reply[];
  /** A deliberate reuse of a settled key with another body: its only right answer is 422. */
  reuse: boolean;
}

export interface FinalPayment {
  id: string;
  status: PaymentStatus;
  /** updated_at - created_at: how long the payment took to become terminal. */
  msToTerminal: number;
}

export interface KeyRow {
  clientId: string;
  key: string;
  paymentId: string;
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
  maxExamples: number;
}

interface Verdict {
  requests: number;
  payments: number;
  charges: number;
  double_charges: number;
  orphan_charges: number;
  lost: number;
  non_terminal: number;
  max_ms_to_terminal: number;
  requires_review: number;
  /** Of those, the ones whose charge succeeded after all: a person will refund or confirm them. */
  requires_review_charged: number;
  /** No violation of any kind. */
  ok: boolean;
  by_status: Record<PaymentStatus, number>;
  /** Answers the clients received, by status (and error code), and network failures by cause. */
  answers: Record<string, number>;
  /** What the clients saw while Postgres was down: the requests in flight at any time of an outage. */
  postgres_outages: {
    count: number;
    down_ms: number;
    max_recovery_ms: number;
    requests: number;
    answers: Record<string, number>;
  };
  /** Further checks, zero when all is well. */
  violations: {
    /** A final answer the ledger disagrees with, or a key that maps to another payment than the one it named. */
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
  };
  examples?: Record<string, Example[]>;
}

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

const CLIENT_TIMEOUT = 'network TimeoutError';

/** 201, 402 and 202 name a payment that exists: the API committed it before answering. */
function namesPayment(reply: Reply): reply is HttpReply & { paymentId: string } {
  return reply.kind === 'http' && [201, 202, 402].includes(reply.status) && reply.paymentId !== undefined;
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

  for (const exchange of input.exchanges) {
    requests += exchange.replies.length;
    for (const reply of exchange.replies) {
      const answer = label(reply);
      answers[answer] = (answers[answer] ?? 0) + 1;
      if (reply.kind === 'http' && reply.status === 500) serverErrors++;
      if (duringOutage(reply)) {
        outageRequests++;
        outageAnswers[answer] = (outageAnswers[answer] ?? 0) + 1;
        if (answer === CLIENT_TIMEOUT && sentWhileDown(reply)) {
          hangs++;
          note('hangs', { key: exchange.key, sent_at: new Date(reply.at).toISOString() });
        }
      }
    }
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
  const auditViolations = Object.values(audited).reduce((sum, found) => sum + found.count, 0);
  const doubleCharges = audited.double_charge.count + audited.order_charged_twice.count + keysChargedTwice;
  const violations = {
    contradicted,
    reuse_not_refused: reuseNotRefused,
    server_errors: serverErrors,
    audit: auditViolations,
    hangs,
    not_recovered: input.outages.filter((outage) => outage.recoveryMs === null).length,
    unexpected_exits: input.unexpectedExits,
  };
  const verdict: Verdict = {
    requests,
    payments: input.payments.length,
    charges: input.audit.charges.total,
    double_charges: doubleCharges,
    orphan_charges: audited.orphan_charge.count,
    lost,
    non_terminal: byStatus.pending,
    max_ms_to_terminal: Math.round(maxMsToTerminal),
    requires_review: byStatus.requires_review,
    requires_review_charged: input.audit.requires_review_charged,
    ok:
      doubleCharges === 0 &&
      audited.orphan_charge.count === 0 &&
      lost === 0 &&
      byStatus.pending === 0 &&
      Object.values(violations).every((count) => count === 0),
    by_status: byStatus,
    answers,
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
