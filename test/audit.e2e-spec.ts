import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import type { AuditReport } from '../scripts/lib/ledger-audit';
import { freePort } from './support/private-redis';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { TEST_DATABASE_URL } from './support/test-env';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(30_000);

const AUDIT = join(__dirname, '..', 'dist', 'scripts', 'audit.js');

/**
 * `npm run audit` as an operator runs it: the compiled script against the
 * test database, the mock provider and Redis, first on a ledger the API made,
 * then on one broken by hand in every way the audit knows.
 */
describe('npm run audit', () => {
  // A fresh provider per test: its ledger and the payments table must start empty together.
  const stack = useInProcessStack({ client: 'audited shop', providerEvents: true }, 'test');

  /** Every event the provider emitted so far has been answered with a 2xx. */
  async function eventsDelivered(): Promise<void> {
    await eventually(async () => ((await stack.provider.events()).every((event) => event.delivered) ? true : undefined), {
      what: 'the provider to deliver its events',
    });
  }

  async function audit(env: Record<string, string> = {}) {
    const run = promisify(execFile);
    const result = await run(process.execPath, [AUDIT, '--examples', '2'], {
      env: {
        ...process.env,
        DATABASE_URL: TEST_DATABASE_URL,
        PROVIDER_URL: stack.provider.url,
        REDIS_URL: stack.config.redisUrl,
        QUEUE_PREFIX: stack.config.queuePrefix,
        ...env,
      },
      timeout: 60_000,
    }).then(
      (ok) => ({ code: 0, stdout: ok.stdout, stderr: ok.stderr }),
      (failed: { code: number; stdout: string; stderr: string }) => failed,
    );
    return { code: result.code, stderr: result.stderr, report: result.stdout ? (JSON.parse(result.stdout) as AuditReport) : undefined };
  }

  async function pay(paymentMethod: string, orderId?: string): Promise<{ id: string; status: number }> {
    const res = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', randomUUID())
      .send({ amount: 700, currency: 'USD', payment_method: paymentMethod, order_id: orderId });
    return { id: res.status === 402 ? res.body.error.payment.id : res.body.id, status: res.status };
  }

  /** A refund through the API, of part of a payment: its status and the refund. */
  async function refund(paymentId: string, amount?: number): Promise<{ status: number; id: string; body: Record<string, unknown> }> {
    const res = await request(stack.url)
      .post('/v1/refunds')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', randomUUID())
      .send({ payment: paymentId, amount });
    const body = (res.status === 402 ? res.body.error.refund : res.body) as Record<string, unknown>;
    return { status: res.status, id: body?.id as string, body };
  }

  /** The charge of a succeeded payment, as the API shows it. */
  async function chargeOfPayment(paymentId: string): Promise<string> {
    const [{ provider_charge_id: chargeId }] = (await stack.dataSource.query(
      `SELECT provider_charge_id FROM payments WHERE id = $1`,
      [paymentId],
    )) as { provider_charge_id: string }[];
    return chargeId;
  }

  /** A refund made behind the API's back, straight at the provider. */
  async function refundDirectly(idempotencyKey: string, charge: string, amount: number, reference: string): Promise<void> {
    const res = await fetch(`${stack.provider.url}/refunds`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify({ charge, amount, reference }),
    });
    expect(res.status).toBe(201);
  }

  /** A charge made behind the API's back, straight at the provider. */
  async function chargeDirectly(idempotencyKey: string, reference: string): Promise<void> {
    const res = await fetch(`${stack.provider.url}/charges`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify({ amount: 700, currency: 'USD', payment_method: 'pm_card_ok', reference }),
    });
    expect(res.status).toBe(201);
  }

  it('passes the ledger the API made, and counts it', async () => {
    expect((await pay('pm_card_ok')).status).toBe(201);
    expect((await pay('pm_card_declined')).status).toBe(402);
    expect((await pay('pm_card_unavailable')).status).toBe(202);

    const { code, report } = await audit();

    expect(code).toBe(0);
    expect(report).toMatchObject({
      ok: true,
      payments: { total: 3, succeeded: 1, failed: 1, pending: 1, requires_review: 0 },
      charges: { total: 2, succeeded: 1, failed: 1 },
    });
  });

  it('passes refunds the API made, of every outcome, and counts them', async () => {
    const paid = await pay('pm_card_ok');
    const declined = await pay('pm_card_refund_fails');
    const slow = await pay('pm_card_refund_pending');
    expect((await refund(paid.id, 200)).status).toBe(201);
    expect((await refund(paid.id)).status).toBe(201);
    expect((await refund(paid.id, 1)).status).toBe(400);
    expect((await refund(declined.id, 300)).status).toBe(402);
    expect((await refund(slow.id, 100)).status).toBe(202);

    const { code, report } = await audit();

    expect(code).toBe(0);
    expect(report).toMatchObject({
      ok: true,
      refunds: { total: 4, failed: 1 },
      provider_refunds: { total: 4, failed: 1 },
    });
    expect(report!.refunds.succeeded + report!.refunds.pending).toBe(3);
  });

  /**
   * A write that skips the ledger and the schema's triggers, as a hand-made
   * fix by someone with superuser rights can: a status change without its
   * merchant event, which the schema otherwise refuses at commit.
   */
  async function aroundTheSchema(sql: string, params: unknown[]): Promise<void> {
    await stack.dataSource.transaction(async (db) => {
      await db.query(`SET LOCAL session_replication_role = replica`);
      await db.query(sql, params);
    });
  }

  it('fails a broken ledger, naming every kind of violation', async () => {
    const doubled = await pay('pm_card_ok');
    const repriced = await pay('pm_card_ok');
    const unpaid = await pay('pm_card_declined');
    const refunded = await pay('pm_card_ok', 'ord_twice');
    const forgotten = await pay('pm_card_unavailable');
    const overlooked = await pay('pm_card_ok');

    await chargeDirectly(`pk_stray_${randomUUID()}`, doubled.id);
    await chargeDirectly('pk_pay_ghost', 'pay_ghost');
    await stack.dataSource.query(`UPDATE payments SET amount = 701 WHERE id = $1`, [repriced.id]);
    await aroundTheSchema(`UPDATE payments SET status = 'succeeded' WHERE id = $1`, [unpaid.id]);
    // A failed payment does not hold its order: a second one may be charged.
    await aroundTheSchema(`UPDATE payments SET status = 'failed' WHERE id = $1`, [refunded.id]);
    const recharged = await pay('pm_card_ok', 'ord_twice');
    expect(recharged.status).toBe(201);
    await stack.dataSource.query(
      `UPDATE payments SET created_at = now() - interval '1 hour', next_reconcile_at = now() - interval '1 hour'
        WHERE id = $1`,
      [forgotten.id],
    );
    // Events would settle the review below: let them all in first.
    await eventsDelivered();
    // In review although the provider's charge succeeded, and its re-check long overdue.
    await aroundTheSchema(
      `UPDATE payments SET status = 'requires_review', created_at = now() - interval '1 hour',
                           next_reconcile_at = now() - interval '1 hour'
        WHERE id = $1`,
      [overlooked.id],
    );
    await stack.dataSource.query(
      `UPDATE idempotency_keys SET response_status = NULL, response_body = NULL, completed_at = NULL, expires_at = NULL
        WHERE payment_id = $1`,
      [overlooked.id],
    );
    // An event the API acknowledged without keeping its record.
    const [{ message_id: forgottenEvent }] = (await stack.dataSource.query(
      `SELECT min(message_id) AS message_id FROM processed_messages`,
    )) as { message_id: string }[];
    await stack.dataSource.query(`DELETE FROM processed_messages WHERE message_id = $1`, [forgottenEvent]);

    const { code, report } = await audit();

    expect(code).toBe(1);
    expect(report?.ok).toBe(false);
    const counts = Object.fromEntries(Object.entries(report!.violations).map(([kind, found]) => [kind, found.count]));
    expect(counts).toEqual({
      succeeded_without_charge: 1,
      double_charge: 1,
      order_charged_twice: 1,
      charge_mismatch: 2,
      orphan_charge: 1,
      failed_with_succeeded_charge: 1,
      stale_pending_unscheduled: 1,
      review_behind_provider: 1,
      acknowledged_event_unrecorded: 1,
      double_refund: 0,
      orphan_refund: 0,
      over_refund: 0,
      refund_mismatch: 0,
      refund_status_mismatch: 0,
      refund_sums_mismatch: 0,
    });
    const named = (kind: keyof AuditReport['violations']) => report!.violations[kind].examples;
    expect(named('double_charge')).toEqual([expect.objectContaining({ payment_id: doubled.id })]);
    expect(named('charge_mismatch').map((example) => example.payment_id).sort()).toEqual([doubled.id, repriced.id].sort());
    expect(named('succeeded_without_charge')).toEqual([{ payment_id: unpaid.id }]);
    expect(named('failed_with_succeeded_charge')).toEqual([expect.objectContaining({ payment_id: refunded.id })]);
    expect(named('orphan_charge')).toEqual([expect.objectContaining({ reference: 'pay_ghost' })]);
    expect(named('order_charged_twice')).toEqual([expect.objectContaining({ payments: expect.stringContaining(recharged.id) })]);
    expect(named('stale_pending_unscheduled')).toEqual([expect.objectContaining({ payment_id: forgotten.id })]);
    expect(named('acknowledged_event_unrecorded')).toEqual([{ event_id: forgottenEvent }]);
    expect(named('review_behind_provider')).toEqual([
      expect.objectContaining({ payment_id: overlooked.id, charge_status: 'succeeded' }),
    ]);
  });

  it('fails a ledger whose refunds disagree with the provider or with their payments, naming every kind', async () => {
    const doubled = await pay('pm_card_ok');
    const overdrawn = await pay('pm_card_ok');
    const flipped = await pay('pm_card_ok');
    const miscounted = await pay('pm_card_ok');
    const twice = await refund(doubled.id, 200);
    const some = await refund(overdrawn.id, 200);
    const reversed = await refund(flipped.id, 300);
    expect((await refund(miscounted.id, 400)).status).toBe(201);
    expect([twice.status, some.status, reversed.status]).toEqual([201, 201, 201]);

    // The provider refunds one refund of ours twice: a second key, the same reference.
    await refundDirectly(`rk_stray_${randomUUID()}`, await chargeOfPayment(doubled.id), 200, twice.id);
    // A refund the provider made for no refund of ours.
    await refundDirectly('rk_re_ghost', await chargeOfPayment(doubled.id), 50, 're_ghost');
    // A refund row written past the reservation: the payment's refunds now sum above it (and above its sums).
    await aroundTheSchema(
      `INSERT INTO refunds (id, client_id, payment_id, amount, currency, provider_key, provider_charge_id)
       SELECT 're_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B', client_id, id, 600, currency, 'rk_re_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B', provider_charge_id
         FROM payments WHERE id = $1`,
      [overdrawn.id],
    );
    // Failed here, succeeded at the provider; the payment's sums follow the refund, so only the status disagrees.
    await aroundTheSchema(`UPDATE refunds SET status = 'failed' WHERE id = $1`, [reversed.id]);
    await aroundTheSchema(`UPDATE payments SET amount_reserved = 0, amount_refunded = 0 WHERE id = $1`, [flipped.id]);
    // A succeeded refund the payment's sum forgot.
    await stack.dataSource.query(`UPDATE payments SET amount_refunded = 0 WHERE id = $1`, [miscounted.id]);
    await eventsDelivered();

    const { code, report } = await audit();

    expect(code).toBe(1);
    const counts = Object.fromEntries(
      Object.entries(report!.violations)
        .filter(([, found]) => found.count > 0)
        .map(([kind, found]) => [kind, found.count]),
    );
    expect(counts).toEqual({
      double_refund: 1,
      refund_mismatch: 1,
      orphan_refund: 1,
      over_refund: 1,
      refund_status_mismatch: 1,
      refund_sums_mismatch: 2,
    });
    const named = (kind: keyof AuditReport['violations']) => report!.violations[kind].examples;
    expect(named('double_refund')).toEqual([expect.objectContaining({ refund_id: twice.id })]);
    expect(named('refund_mismatch')).toEqual([expect.objectContaining({ refund_id: twice.id })]);
    expect(named('orphan_refund')).toEqual([expect.objectContaining({ reference: 're_ghost', amount: 50 })]);
    expect(named('over_refund')).toEqual([{ payment_id: overdrawn.id, amount: 700, refunds_not_failed: 800, refunds: 2 }]);
    expect(named('refund_status_mismatch')).toEqual([{ refund_id: reversed.id, status: 'failed', provider_status: 'succeeded' }]);
    expect(named('refund_sums_mismatch').map((example) => example.payment_id).sort()).toEqual([overdrawn.id, miscounted.id].sort());
  });

  it('exits 2 and says why when a store cannot be read', async () => {
    const { code, stderr, report } = await audit({ PROVIDER_URL: `http://127.0.0.1:${await freePort()}` });

    expect(code).toBe(2);
    expect(report).toBeUndefined();
    expect(stderr).toMatch(/^audit could not run: /);
  });
});
