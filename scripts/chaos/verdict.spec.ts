import { type AuditReport, type Example, VIOLATION_KINDS } from '../lib/ledger-audit';
import type { HttpReply, Reply } from '../../test/support/reply-recorder';
import type { Receipt } from '../../test/support/webhook-receiver';
import type { EventType } from '../../src/ledger/outbox';
import {
  CLEAN_VERDICT,
  type ClientCalls,
  type EventRow,
  type Exchange,
  type FinalPayment,
  type FinalRefund,
  type KeyRow,
  type MerchantEventsInput,
  type Outage,
  type RefundExchange,
  type RefundKeyRow,
  judge,
  missingEvents,
} from './verdict';

function cleanAudit(overrides: Partial<Record<(typeof VIOLATION_KINDS)[number], number>> = {}): AuditReport {
  const violations = Object.fromEntries(
    VIOLATION_KINDS.map((kind) => [
      kind,
      { count: overrides[kind] ?? 0, examples: (overrides[kind] ? [{ payment_id: `pay_${kind}` }] : []) as Example[] },
    ]),
  ) as AuditReport['violations'];
  return {
    ok: Object.keys(overrides).length === 0,
    payments: { total: 0, pending: 0, succeeded: 0, failed: 0, requires_review: 0 },
    charges: { total: 3, pending: 0, succeeded: 2, failed: 1 },
    refunds: { total: 0, pending: 0, succeeded: 0, failed: 0, requires_review: 0 },
    provider_refunds: { total: 0, pending: 0, succeeded: 0, failed: 0 },
    requires_review_charged: 0,
    violations,
  };
}

const http = (status: number, facts: Partial<HttpReply> = {}): Reply => ({
  kind: 'http',
  status,
  replayed: false,
  at: 0,
  ms: 5,
  ...facts,
});
const created = (paymentId: string) => http(201, { paymentId, paymentStatus: 'succeeded' });
const lostReply: Reply = { kind: 'network', error: 'ECONNRESET', at: 0, ms: 5 };
const timedOut = (at: number): Reply => ({ kind: 'network', error: 'TimeoutError', at, ms: 3_000 });

function sut(
  exchanges: Exchange[],
  payments: FinalPayment[],
  keys: KeyRow[],
  audit: AuditReport = cleanAudit(),
  outages: Outage[] = [],
) {
  return judge({ exchanges, payments, keys, audit, outages, unexpectedExits: 0, pendingAfterDrain: [], merchantEvents: NO_EVENTS, ...NO_REFUNDS, maxExamples: 2 });
}

const NO_EVENTS: MerchantEventsInput = { payments: [], refunds: [], events: [], endpoints: [] };
const NO_REFUNDS = { refundExchanges: [], refunds: [], refundKeys: [], refundsUndecidedAfterDrain: [] };

/** How the calls of an exchange ended: with a final answer, nothing given up. */
const FINAL: ClientCalls = { gaveUp: [], abandoned: false, silent: 0 };
const exchange = (key: string, replies: Reply[], reuse = false, calls: ClientCalls = FINAL): Exchange => ({ clientId: 'c1', key, replies, reuse, ...calls });
const paid = (id: string, msToTerminal = 100): FinalPayment => ({ id, status: 'succeeded', msToTerminal });

describe('judge', () => {
  it('passes a run where every client got its answer and the ledger agrees', () => {
    const verdict = sut(
      [
        exchange('k1', [lostReply, http(409, { code: 'idempotency_key_in_use' }), created('pay_1')]),
        exchange('k2', [http(402, { code: 'card_declined', paymentId: 'pay_2', paymentStatus: 'failed' })]),
        exchange('k3', [http(202, { paymentId: 'pay_3', paymentStatus: 'requires_review' })]),
        exchange('k4', [http(409, { code: 'order_already_paid' })]),
        exchange('k1', [http(422, { code: 'idempotency_key_reused' })], true),
      ],
      [paid('pay_1', 250), { id: 'pay_2', status: 'failed', msToTerminal: 40 }, { id: 'pay_3', status: 'requires_review', msToTerminal: 900 }],
      [
        { clientId: 'c1', key: 'k1', paymentId: 'pay_1' },
        { clientId: 'c1', key: 'k2', paymentId: 'pay_2' },
        { clientId: 'c1', key: 'k3', paymentId: 'pay_3' },
      ],
    );

    expect(verdict).toEqual({
      ...CLEAN_VERDICT,
      requests: 7,
      payments: 3,
      charges: 3,
      max_ms_to_terminal: 900,
      requires_review: 1,
      requires_review_charged: 0,
      events: 0,
      webhook_latency_ms: { p50: null, p99: null },
      webhook_receipts: { total: 0, duplicates: 0, answers: {} },
      refunds: 0,
      refunds_by_status: { pending: 0, succeeded: 0, failed: 0, requires_review: 0 },
      refund_answers: {},
      given_up: {},
      abandoned: 0,
      by_status: { pending: 0, succeeded: 1, failed: 1, requires_review: 1 },
      answers: {
        'network ECONNRESET': 1,
        '409 idempotency_key_in_use': 1,
        '201': 1,
        '402 card_declined': 1,
        '202': 1,
        '409 order_already_paid': 1,
        '422 idempotency_key_reused': 1,
      },
      postgres_outages: { count: 0, down_ms: 0, max_recovery_ms: 0, requests: 0, answers: {} },
    });
  });

  it('counts the client\'s give-ups by reason, and an operation left without a final answer as abandoned, not as a violation', () => {
    const unavailable = http(503, { code: 'service_unavailable' });
    const verdict = sut(
      [
        // Out of retry budget, resumed with its key a second later, then 201.
        exchange('k1', [unavailable, unavailable, created('pay_1')], false, { ...FINAL, gaveUp: ['budget_exhausted'] }),
        // Given up twice and the window over: the ledger settled it all the same.
        exchange('k2', [http(202, { paymentId: 'pay_2', paymentStatus: 'pending' }), lostReply], false, {
          gaveUp: ['deadline', 'max_retries'],
          abandoned: true,
          silent: 0,
        }),
        exchange('k1', [http(422, { code: 'idempotency_key_reused' })], true, { ...FINAL, gaveUp: ['not_retryable'] }),
      ],
      [paid('pay_1'), paid('pay_2')],
      [
        { clientId: 'c1', key: 'k1', paymentId: 'pay_1' },
        { clientId: 'c1', key: 'k2', paymentId: 'pay_2' },
      ],
    );

    expect(verdict).toMatchObject({ ...CLEAN_VERDICT, given_up: { budget_exhausted: 1, deadline: 1, max_retries: 1, not_retryable: 1 }, abandoned: 1 });
    expect(verdict.examples?.abandoned).toEqual([{ operation: 'payment', key: 'k2', gave_up: 'deadline,max_retries' }]);
  });

  it('fails a run where a client call rejected without telling onGiveUp', () => {
    const verdict = sut([exchange('k1', [lostReply], false, { ...FINAL, silent: 1 })], [], []);

    expect(verdict).toMatchObject({ ok: false, violations: { silent_give_ups: 1 } });
    expect(verdict.examples?.silent_give_ups).toEqual([{ operation: 'payment', key: 'k1' }]);
  });

  it('counts a payment named to a client but missing from the ledger as lost', () => {
    const verdict = sut([exchange('k1', [http(202, { paymentId: 'pay_1', paymentStatus: 'pending' })])], [], []);

    expect(verdict).toMatchObject({ ok: false, lost: 2 });
    expect(verdict.examples?.lost).toEqual([
      { key: 'k1', payment_id: 'pay_1', why: 'named to the client, missing from the ledger' },
      { key: 'k1', payment_id: null, why: 'accepted key without its payment' },
    ]);
  });

  it('counts an accepted key whose row is gone as lost, even when its payment exists', () => {
    const verdict = sut([exchange('k1', [created('pay_1')])], [paid('pay_1')], []);
    expect(verdict).toMatchObject({ ok: false, lost: 1 });
  });

  it('does not call a key that never named a payment lost', () => {
    expect(sut([exchange('k1', [lostReply, http(503, { code: 'service_unavailable' })])], [], []).ok).toBe(true);
  });

  it('counts one key that led to two charged payments as a double charge', () => {
    const verdict = sut(
      [exchange('k1', [created('pay_1'), created('pay_2')])],
      [paid('pay_1'), paid('pay_2')],
      [{ clientId: 'c1', key: 'k1', paymentId: 'pay_1' }],
    );

    expect(verdict).toMatchObject({ ok: false, double_charges: 1 });
    expect(verdict.examples?.key_charged_twice).toEqual([{ key: 'k1', payments: 'pay_1,pay_2' }]);
  });

  it('adds the audit’s double charges (per payment and per order) and orphans', () => {
    const verdict = sut([], [], [], cleanAudit({ double_charge: 2, order_charged_twice: 1, orphan_charge: 4 }));

    expect(verdict).toMatchObject({ ok: false, double_charges: 3, orphan_charges: 4, violations: { audit: 7 } });
    expect(verdict.examples?.['audit orphan_charge']).toEqual([{ payment_id: 'pay_orphan_charge' }]);
  });

  it('fails on any other audit violation', () => {
    expect(sut([], [], [], cleanAudit({ succeeded_without_charge: 1 })).violations.audit).toBe(1);
  });

  it('counts a pending payment as non-terminal and keeps it out of the time to terminal', () => {
    const verdict = sut([], [paid('pay_1', 300), { id: 'pay_2', status: 'pending', msToTerminal: 99_999 }], []);

    expect(verdict).toMatchObject({ ok: false, non_terminal: 1, max_ms_to_terminal: 300 });
  });

  it('fails a run in which a payment was still pending when the drain ended, even if it settled during the wait for events', () => {
    const verdict = judge({
      exchanges: [],
      payments: [paid('pay_1'), paid('pay_2', 90_000)],
      keys: [],
      audit: cleanAudit(),
      outages: [],
      unexpectedExits: 0,
      pendingAfterDrain: ['pay_2'],
      merchantEvents: NO_EVENTS,
      ...NO_REFUNDS,
      maxExamples: 2,
    });

    expect(verdict).toMatchObject({ ok: false, non_terminal: 0, pending_after_drain: 1 });
    expect(verdict.examples?.pending_after_drain).toEqual([{ payment_id: 'pay_2' }]);
  });

  it('flags a final answer the ledger contradicts', () => {
    const verdict = sut(
      [exchange('k1', [created('pay_1')])],
      [{ id: 'pay_1', status: 'failed', msToTerminal: 1 }],
      [{ clientId: 'c1', key: 'k1', paymentId: 'pay_1' }],
    );

    expect(verdict.violations.contradicted).toBe(1);
    expect(verdict.examples?.contradicted).toEqual([{ key: 'k1', payment_id: 'pay_1', told: 'succeeded', ledger: 'failed' }]);
  });

  it.each(['succeeded', 'failed'] as const)(
    'accepts a payment told requires_review that a provider event or re-check later made %s: review is not an end',
    (status) => {
      const verdict = sut(
        [exchange('k1', [http(202, { paymentId: 'pay_1', paymentStatus: 'requires_review' })])],
        [{ id: 'pay_1', status, msToTerminal: 1 }],
        [{ clientId: 'c1', key: 'k1', paymentId: 'pay_1' }],
      );
      expect(verdict.violations.contradicted).toBe(0);
    },
  );

  it('flags a key whose row points at another payment than the one it named', () => {
    const verdict = sut([exchange('k1', [created('pay_1')])], [paid('pay_1'), paid('pay_9')], [
      { clientId: 'c1', key: 'k1', paymentId: 'pay_9' },
    ]);
    expect(verdict.violations.contradicted).toBe(1);
  });

  it.each([
    ['answered 201', [created('pay_1')]],
    ['never answered', [lostReply]],
  ])('flags a reused key with another body that was %s instead of 422', (_how, replies) => {
    const verdict = sut([exchange('k1', replies, true)], [], []);
    expect(verdict.violations.reuse_not_refused).toBe(1);
    expect(verdict.lost).toBe(0);
  });

  it('counts 500s as server errors', () => {
    const verdict = sut([exchange('k1', [http(500, { code: 'internal_error' })])], [], []);
    expect(verdict).toMatchObject({ ok: false, violations: { server_errors: 1 } });
  });

  it('fails a run in which a process exited without being killed', () => {
    const verdict = judge({
      exchanges: [],
      payments: [],
      keys: [],
      audit: cleanAudit(),
      outages: [],
      unexpectedExits: 1,
      pendingAfterDrain: [],
      merchantEvents: NO_EVENTS,
      ...NO_REFUNDS,
      maxExamples: 2,
    });
    expect(verdict).toMatchObject({ ok: false, violations: { unexpected_exits: 1 } });
  });

  describe('Postgres outages', () => {
    const outage: Outage = { fromMs: 10_000, toMs: 13_000, recoveryMs: 400 };
    const unavailable = (at: number) => http(503, { code: 'service_unavailable', at, ms: 4 });

    it('counts the answers of requests in flight at any time of an outage, and only those', () => {
      const verdict = sut(
        [
          exchange('k1', [
            http(201, { paymentId: 'pay_1', paymentStatus: 'succeeded', at: 9_990, ms: 20 }),
            unavailable(11_000),
          ]),
          exchange('k2', [unavailable(12_999), http(409, { code: 'idempotency_key_in_use', at: 13_001 }), created('pay_2')]),
        ],
        [paid('pay_1'), paid('pay_2')],
        [
          { clientId: 'c1', key: 'k1', paymentId: 'pay_1' },
          { clientId: 'c1', key: 'k2', paymentId: 'pay_2' },
        ],
        cleanAudit(),
        [outage, { fromMs: 20_000, toMs: 21_500, recoveryMs: 900 }],
      );

      expect(verdict.postgres_outages).toEqual({
        count: 2,
        down_ms: 4_500,
        max_recovery_ms: 900,
        requests: 3,
        answers: { '201': 1, '503 service_unavailable': 2 },
      });
      expect(verdict.ok).toBe(true);
    });

    it('counts a client timeout of a request sent while Postgres was down as a hang, and no other', () => {
      const verdict = sut(
        [exchange('k1', [timedOut(9_000), timedOut(12_000), timedOut(30_000)])],
        [],
        [],
        cleanAudit(),
        [outage],
      );

      expect(verdict).toMatchObject({
        ok: false,
        violations: { hangs: 1 },
        postgres_outages: { requests: 2, answers: { 'network TimeoutError': 2 } },
      });
      expect(verdict.examples?.hangs).toEqual([{ operation: 'payment', key: 'k1', sent_at: new Date(12_000).toISOString(), waited_ms: 3_000 }]);
    });

    it('fails an outage after which the APIs were never ready again', () => {
      const verdict = sut([], [], [], cleanAudit(), [outage, { ...outage, recoveryMs: null }]);
      expect(verdict).toMatchObject({ ok: false, violations: { not_recovered: 1 }, postgres_outages: { max_recovery_ms: 400 } });
    });
  });

  describe('merchant events', () => {
    /** A run's events, of payments alone unless refunds are given. */
    type EventsInput = Omit<MerchantEventsInput, 'refunds'> & { refunds?: MerchantEventsInput['refunds'] };
    const event = (
      id: string,
      paymentId: string,
      type: EventType,
      createdAtMs = 1_000,
      clientId = 'c1',
    ): EventRow & { paymentId: string } => ({
      id,
      clientId,
      type,
      paymentId,
      createdAtMs,
    });
    const body = (webhookId: string, paymentId: string, type: EventType) =>
      JSON.stringify({ id: webhookId, object: 'event', type, data: { object: { id: paymentId } } });
    const receipt = (
      webhookId: string,
      paymentId: string,
      type: EventType,
      answer: Receipt['answer'],
      at: number,
      verified = true,
    ): Receipt => ({ webhookId, body: body(webhookId, paymentId, type), headers: {}, verified, answer, at });
    const judgeEvents = (merchantEvents: EventsInput) =>
      judge({
        exchanges: [],
        payments: [],
        keys: [],
        audit: cleanAudit(),
        outages: [],
        unexpectedExits: 0,
        pendingAfterDrain: [],
        merchantEvents: { refunds: [], ...merchantEvents },
        ...NO_REFUNDS,
        maxExamples: 2,
      });

    it('passes every status change delivered once or more under its one webhook-id, and measures from commit to first 2xx', () => {
      const verdict = judgeEvents({
        payments: [
          { id: 'pay_1', clientId: 'c1', status: 'succeeded' },
          { id: 'pay_2', clientId: 'c2', status: 'failed' },
        ],
        events: [
          event('evt_a', 'pay_1', 'payment.requires_review', 1_000),
          event('evt_b', 'pay_1', 'payment.succeeded', 2_000),
          event('evt_c', 'pay_2', 'payment.failed', 1_000, 'c2'),
        ],
        endpoints: [
          {
            clientId: 'c1',
            receipts: [
              receipt('evt_a', 'pay_1', 'payment.requires_review', 500, 1_010),
              receipt('evt_a', 'pay_1', 'payment.requires_review', 204, 1_300),
              receipt('evt_b', 'pay_1', 'payment.succeeded', 204, 2_050),
              // At least once: the same webhook-id again after its 2xx is a duplicate, not a violation.
              receipt('evt_b', 'pay_1', 'payment.succeeded', 204, 9_000),
            ],
          },
          {
            clientId: 'c2',
            receipts: [
              receipt('evt_c', 'pay_2', 'payment.failed', 'held', 1_020),
              receipt('evt_c', 'pay_2', 'payment.failed', 204, 3_000),
            ],
          },
        ],
      });

      expect(verdict).toMatchObject({
        ok: true,
        events: 3,
        events_missing: 0,
        events_split: 0,
        webhook_latency_ms: { p50: 300, p99: 2_000 },
        webhook_receipts: { total: 6, duplicates: 1, answers: { '204': 4, '500': 1, held: 1 } },
        violations: { events_unverified: 0, events_foreign: 0 },
      });
      expect(verdict.examples).toBeUndefined();
    });

    it('takes the nearest-rank median and 99th percentile of the latencies', () => {
      const events = Array.from({ length: 200 }, (_, i) => event(`evt_${i}`, `pay_${i}`, 'payment.succeeded', 0));
      const verdict = judgeEvents({
        payments: [],
        events,
        endpoints: [{ clientId: 'c1', receipts: events.map((e, i) => receipt(e.id, e.paymentId, e.type, 200, i + 1)) }],
      });
      expect(verdict.webhook_latency_ms).toEqual({ p50: 100, p99: 198 });
    });

    it('counts an event that never got a 2xx, or got it only at another client’s endpoint, as missing', () => {
      const verdict = judgeEvents({
        payments: [
          { id: 'pay_1', clientId: 'c1', status: 'succeeded' },
          { id: 'pay_2', clientId: 'c1', status: 'failed' },
        ],
        events: [event('evt_a', 'pay_1', 'payment.succeeded'), event('evt_b', 'pay_2', 'payment.failed')],
        endpoints: [
          {
            clientId: 'c1',
            receipts: [
              receipt('evt_a', 'pay_1', 'payment.succeeded', 500, 1_100),
              receipt('evt_a', 'pay_1', 'payment.succeeded', 'held', 1_500),
            ],
          },
          { clientId: 'c2', receipts: [receipt('evt_b', 'pay_2', 'payment.failed', 204, 1_100)] },
        ],
      });

      expect(verdict).toMatchObject({ ok: false, events_missing: 2, violations: { events_foreign: 1 } });
      expect(verdict.examples?.events_missing).toEqual([
        { event_id: 'evt_a', payment_id: 'pay_1', type: 'payment.succeeded', why: 'no 2xx at its endpoint' },
        { event_id: 'evt_b', payment_id: 'pay_2', type: 'payment.failed', why: 'no 2xx at its endpoint' },
      ]);
    });

    it('counts a final status that no event announces as missing, and asks nothing of a pending payment', () => {
      const input: EventsInput = {
        payments: [
          { id: 'pay_1', clientId: 'c1', status: 'succeeded' },
          { id: 'pay_2', clientId: 'c1', status: 'pending' },
        ],
        // Announced its review, never its success.
        events: [event('evt_a', 'pay_1', 'payment.requires_review')],
        endpoints: [{ clientId: 'c1', receipts: [receipt('evt_a', 'pay_1', 'payment.requires_review', 204, 1_100)] }],
      };

      expect(missingEvents({ refunds: [], ...input })).toEqual([
        { event_id: null, payment_id: 'pay_1', type: 'payment.succeeded', why: 'no event announces its status' },
      ]);
      expect(judgeEvents(input)).toMatchObject({ ok: false, events_missing: 1 });
    });

    it('has nothing missing once every event got its 2xx: the end of the run’s wait', () => {
      expect(
        missingEvents({
          refunds: [],
          payments: [{ id: 'pay_1', clientId: 'c1', status: 'failed' }],
          events: [event('evt_a', 'pay_1', 'payment.failed')],
          endpoints: [{ clientId: 'c1', receipts: [receipt('evt_a', 'pay_1', 'payment.failed', 204, 1_100)] }],
        }),
      ).toEqual([]);
    });

    it('counts one status change received under two webhook-ids as split', () => {
      const verdict = judgeEvents({
        payments: [{ id: 'pay_1', clientId: 'c1', status: 'succeeded' }],
        events: [event('evt_a', 'pay_1', 'payment.succeeded')],
        endpoints: [
          {
            clientId: 'c1',
            receipts: [
              receipt('evt_a', 'pay_1', 'payment.succeeded', 204, 1_100),
              receipt('evt_z', 'pay_1', 'payment.succeeded', 204, 1_200),
            ],
          },
        ],
      });

      expect(verdict).toMatchObject({ ok: false, events_missing: 0, events_split: 1, webhook_receipts: { duplicates: 0 } });
      expect(verdict.examples?.events_split).toEqual([{ change: 'pay_1 payment.succeeded', webhook_ids: 'evt_a,evt_z' }]);
    });

    it('counts a receipt whose signature did not verify, even one answered 2xx', () => {
      const verdict = judgeEvents({
        payments: [{ id: 'pay_1', clientId: 'c1', status: 'succeeded' }],
        events: [event('evt_a', 'pay_1', 'payment.succeeded')],
        endpoints: [{ clientId: 'c1', receipts: [receipt('evt_a', 'pay_1', 'payment.succeeded', 204, 1_100, false)] }],
      });

      expect(verdict).toMatchObject({ ok: false, violations: { events_unverified: 1 } });
      expect(verdict.examples?.events_unverified).toEqual([{ client_id: 'c1', webhook_id: 'evt_a' }]);
    });

    it('counts a receipt about another client’s payment, an unknown one or no event at all as foreign', () => {
      const verdict = judgeEvents({
        payments: [
          { id: 'pay_1', clientId: 'c1', status: 'succeeded' },
          { id: 'pay_2', clientId: 'c2', status: 'succeeded' },
        ],
        events: [event('evt_a', 'pay_1', 'payment.succeeded'), event('evt_b', 'pay_2', 'payment.succeeded', 1_000, 'c2')],
        endpoints: [
          { clientId: 'c1', receipts: [receipt('evt_a', 'pay_1', 'payment.succeeded', 204, 1_100)] },
          {
            clientId: 'c2',
            receipts: [
              receipt('evt_b', 'pay_2', 'payment.succeeded', 204, 1_100),
              receipt('evt_a', 'pay_1', 'payment.succeeded', 204, 1_200),
              receipt('evt_x', 'pay_404', 'payment.succeeded', 204, 1_300),
              { webhookId: 'evt_y', body: 'not json', headers: {}, verified: true, answer: 204, at: 1_400 },
            ],
          },
        ],
      });

      expect(verdict).toMatchObject({ ok: false, events_missing: 0, violations: { events_foreign: 3 } });
      expect(verdict.examples?.events_foreign).toEqual([
        { client_id: 'c2', webhook_id: 'evt_a', payment_id: 'pay_1', owner: 'c1' },
        { client_id: 'c2', webhook_id: 'evt_x', payment_id: 'pay_404', owner: null },
      ]);
    });
  });

  describe('refunds', () => {
    const refundExchange = (key: string, replies: Reply[], paymentId = 'pay_1', paymentAmount = 1_000): RefundExchange => ({
      clientId: 'c1',
      key,
      paymentId,
      paymentAmount,
      scenario: 'partial',
      replies,
      ...FINAL,
    });
    const refunded = (refundId: string, amount: number) => http(201, { refundId, refundStatus: 'succeeded', amount });
    const refused = (refundId: string, amount: number) =>
      http(402, { code: 'refund_failed', refundId, refundStatus: 'failed', amount });
    const refund = (id: string, amount: number, status: FinalRefund['status'] = 'succeeded', paymentId = 'pay_1'): FinalRefund => ({
      id,
      paymentId,
      amount,
      status,
    });
    const key = (k: string, refundId: string): RefundKeyRow => ({ clientId: 'c1', key: k, refundId });
    const judgeRefunds = (
      refundExchanges: RefundExchange[],
      refunds: FinalRefund[],
      refundKeys: RefundKeyRow[],
      extra: { audit?: AuditReport; refundsUndecidedAfterDrain?: string[] } = {},
    ) =>
      judge({
        exchanges: [],
        payments: [paid('pay_1')],
        keys: [],
        audit: extra.audit ?? cleanAudit(),
        outages: [],
        unexpectedExits: 0,
        pendingAfterDrain: [],
        merchantEvents: NO_EVENTS,
        refundExchanges,
        refunds,
        refundKeys,
        refundsUndecidedAfterDrain: extra.refundsUndecidedAfterDrain ?? [],
        maxExamples: 2,
      });

    it('passes refunds the ledger agrees with, refusals that wrote nothing, and counts them apart from the payments’ answers', () => {
      const verdict = judgeRefunds(
        [
          refundExchange('r1', [lostReply, http(409, { code: 'idempotency_key_in_use' }), refunded('re_1', 400)]),
          refundExchange('r2', [http(202, { refundId: 're_2', refundStatus: 'pending', amount: 600 }), refunded('re_2', 600)]),
          refundExchange('r3', [http(400, { code: 'amount_too_large' })]),
          refundExchange('r4', [refused('re_3', 300)]),
        ],
        [refund('re_1', 400), refund('re_2', 600), refund('re_3', 300, 'failed')],
        [key('r1', 're_1'), key('r2', 're_2'), key('r4', 're_3')],
      );

      expect(verdict).toMatchObject({
        ...CLEAN_VERDICT,
        requests: 7,
        refunds: 3,
        refunds_by_status: { pending: 0, succeeded: 2, failed: 1, requires_review: 0 },
        refund_answers: {
          'network ECONNRESET': 1,
          '409 idempotency_key_in_use': 1,
          '201': 2,
          '202': 1,
          '400 amount_too_large': 1,
          '402 refund_failed': 1,
        },
        answers: {},
      });
      expect(verdict.examples).toBeUndefined();
    });

    it('counts a refund named to a client but missing from the ledger, or whose key lost it, as lost', () => {
      const verdict = judgeRefunds([refundExchange('r1', [http(202, { refundId: 're_1', refundStatus: 'pending' })])], [], []);

      expect(verdict).toMatchObject({ ok: false, lost_refunds: 2 });
      expect(verdict.examples?.lost_refunds).toEqual([
        { key: 'r1', refund_id: 're_1', why: 'named to the client, missing from the ledger' },
        { key: 'r1', refund_id: null, why: 'accepted key without its refund' },
      ]);
    });

    it.each(['failed', 'pending', 'requires_review'] as const)('counts a refund answered 201 that ended %s as lost', (status) => {
      const verdict = judgeRefunds([refundExchange('r1', [refunded('re_1', 400)])], [refund('re_1', 400, status)], [key('r1', 're_1')]);

      expect(verdict).toMatchObject({ ok: false, lost_refunds: 1 });
      expect(verdict.examples?.lost_refunds).toEqual([{ key: 'r1', refund_id: 're_1', why: `answered 201, ${status} in the ledger` }]);
    });

    it('flags a refund answered 402 that succeeded after all, and a refund of another payment than the one asked', () => {
      const verdict = judgeRefunds(
        [refundExchange('r1', [refused('re_1', 400)]), refundExchange('r2', [refunded('re_2', 100)])],
        [refund('re_1', 400), refund('re_2', 100, 'succeeded', 'pay_9')],
        [key('r1', 're_1'), key('r2', 're_2')],
      );

      expect(verdict).toMatchObject({ ok: false, lost_refunds: 0, violations: { contradicted: 2 } });
      expect(verdict.examples?.contradicted).toEqual([
        { key: 'r1', refund_id: 're_1', told: 'failed', ledger: 'succeeded' },
        { key: 'r2', refund_id: 're_2', asked: 'pay_1', ledger: 'pay_9' },
      ]);
    });

    it('counts one key that gave two refunds as a double refund, and adds the audit’s', () => {
      const verdict = judgeRefunds(
        [refundExchange('r1', [refunded('re_1', 100), refunded('re_2', 100)])],
        [refund('re_1', 100), refund('re_2', 100)],
        [key('r1', 're_1')],
        { audit: cleanAudit({ double_refund: 2 }) },
      );

      expect(verdict).toMatchObject({ ok: false, double_refunds: 3, violations: { contradicted: 1, audit: 2 } });
      expect(verdict.examples?.key_refunded_twice).toEqual([{ key: 'r1', refunds: 're_1,re_2' }]);
    });

    it('counts a payment whose refunds answered 201 sum above it as over-refunded, and adds the audit’s', () => {
      const verdict = judgeRefunds(
        [refundExchange('r1', [refunded('re_1', 600)]), refundExchange('r2', [refunded('re_2', 500)])],
        [refund('re_1', 600), refund('re_2', 500)],
        [key('r1', 're_1'), key('r2', 're_2')],
        { audit: cleanAudit({ over_refund: 1 }) },
      );

      expect(verdict).toMatchObject({ ok: false, over_refunds: 2 });
      expect(verdict.examples?.over_refunds).toEqual([{ payment_id: 'pay_1', amount: 1_000, told_refunded: 1_100, refunds: 're_1,re_2' }]);
    });

    it('counts the audit’s orphan refunds', () => {
      const verdict = judgeRefunds([], [], [], { audit: cleanAudit({ orphan_refund: 3 }) });

      expect(verdict).toMatchObject({ ok: false, orphan_refunds: 3, violations: { audit: 3 } });
      expect(verdict.examples?.['audit orphan_refund']).toEqual([{ payment_id: 'pay_orphan_refund' }]);
    });

    it('fails on any other refund finding of the audit', () => {
      const verdict = judgeRefunds([], [], [], { audit: cleanAudit({ refund_sums_mismatch: 1 }) });
      expect(verdict).toMatchObject({ ok: false, violations: { audit: 1 } });
    });

    it('counts a refund pending or in review when the drain ended as not terminal', () => {
      const verdict = judgeRefunds([], [refund('re_1', 100, 'requires_review'), refund('re_2', 100, 'pending')], [], {
        refundsUndecidedAfterDrain: ['re_1', 're_2'],
      });

      expect(verdict).toMatchObject({ ok: false, non_terminal_refunds: 2, refunds: 2 });
      expect(verdict.examples?.non_terminal_refunds).toEqual([{ refund_id: 're_1' }, { refund_id: 're_2' }]);
    });

    it('counts the requests of refunds sent while Postgres was down, and their hangs', () => {
      const verdict = judge({
        exchanges: [],
        payments: [],
        keys: [],
        audit: cleanAudit(),
        outages: [{ fromMs: 10_000, toMs: 13_000, recoveryMs: 400 }],
        unexpectedExits: 0,
        pendingAfterDrain: [],
        merchantEvents: NO_EVENTS,
        refundExchanges: [refundExchange('r1', [timedOut(11_000), http(500, { code: 'internal_error', at: 14_000 })])],
        refunds: [],
        refundKeys: [],
        refundsUndecidedAfterDrain: [],
        maxExamples: 2,
      });

      expect(verdict).toMatchObject({
        ok: false,
        requests: 2,
        violations: { hangs: 1, server_errors: 1 },
        postgres_outages: { requests: 1, answers: { 'network TimeoutError': 1 } },
      });
      expect(verdict.examples?.hangs).toEqual([{ operation: 'refund', key: 'r1', sent_at: new Date(11_000).toISOString(), waited_ms: 3_000 }]);
    });

    it('expects each final refund announced at its client’s endpoint, and no refund event elsewhere', () => {
      const refundEvent = (id: string, refundId: string, type: EventType): EventRow => ({
        id,
        clientId: 'c1',
        type,
        paymentId: null,
        refundId,
        createdAtMs: 1_000,
      });
      const receipt = (webhookId: string, refundId: string, type: EventType): Receipt => ({
        webhookId,
        body: JSON.stringify({ id: webhookId, object: 'event', type, data: { object: { id: refundId } } }),
        headers: {},
        verified: true,
        answer: 204,
        at: 1_100,
      });
      const input: MerchantEventsInput = {
        payments: [],
        refunds: [
          { id: 're_1', clientId: 'c1', status: 'succeeded' },
          { id: 're_2', clientId: 'c1', status: 'failed' },
          { id: 're_3', clientId: 'c1', status: 'pending' },
        ],
        events: [refundEvent('evt_a', 're_1', 'refund.succeeded')],
        endpoints: [{ clientId: 'c1', receipts: [receipt('evt_a', 're_1', 'refund.succeeded')] }],
      };

      expect(missingEvents(input)).toEqual([{ event_id: null, refund_id: 're_2', type: 'refund.failed', why: 'no event announces its status' }]);
      const verdict = judge({
        exchanges: [],
        payments: [],
        keys: [],
        audit: cleanAudit(),
        outages: [],
        unexpectedExits: 0,
        pendingAfterDrain: [],
        merchantEvents: { ...input, events: [...input.events, refundEvent('evt_b', 're_2', 'refund.failed')] },
        ...NO_REFUNDS,
        maxExamples: 2,
      });
      expect(verdict).toMatchObject({ events: 2, events_missing: 1, violations: { events_foreign: 0 } });
      expect(verdict.examples?.events_missing).toEqual([
        { event_id: 'evt_b', refund_id: 're_2', type: 'refund.failed', why: 'no 2xx at its endpoint' },
      ]);
    });
  });
});
