import { QueryFailedError } from 'typeorm';
import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { isUniqueViolation } from '../database/sql';
import { ACTIVE_ORDER_INDEX } from './payments.table';

describe('PaymentsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  const payments = () => given.payments;
  const manager = () => db.dataSource.manager;

  describe('the limits the API states, backed by the schema in code points', () => {
    const set = (table: 'payments' | 'refunds', id: string, assignment: string): Promise<unknown> =>
      db.dataSource.query(`UPDATE ${table} SET ${assignment} WHERE id = $1`, [id]);
    const constraintOf = (error: unknown) => (error as QueryFailedError & { driverError: { constraint?: string } }).driverError.constraint;

    it.each([
      ['payment_method_token_check', `payment_method = repeat(U&'\\2764\\FE0F', 128)`],
      ['description_text_check', `description = repeat('x', 501)`],
      ['order_reference_check', `order_id = repeat(U&'\\2764\\FE0F', 33)`],
      ['metadata_object_check', `metadata = jsonb_build_object(repeat('k', 41), 'v')`],
      ['metadata_object_check', `metadata = jsonb_build_object('k', repeat('v', 501))`],
      ['metadata_object_check', `metadata = '{"k": 1}'`],
      ['metadata_object_check', `metadata = '["v"]'`],
      ['metadata_object_check', `metadata = (SELECT jsonb_object_agg('k' || i, 'v') FROM generate_series(1, 21) i)`],
      ['provider_reference_check', `provider_charge_id = ''`],
      ['failure_code_check', `failure_code = repeat('x', 101)`],
      ['amount_minor_units_check', `amount = 0`],
      ['currency_code_check', `currency = 'usd'`],
      ['provider_version_check', `provider_version = -1`],
      // The refund sums: never refunded more than reserved, never reserved more than the amount, nothing reserved unless succeeded.
      ['payments_refunds_check', `amount_refunded = 1`],
      ['payments_refundable_check', `amount_reserved = 1`],
    ])('%s refuses %s', async (constraint, assignment) => {
      const { payment } = await given.claimed(clientId);

      const error = await set('payments', payment.id, assignment).catch((thrown: unknown) => thrown);

      expect(error).toBeInstanceOf(QueryFailedError);
      expect(constraintOf(error)).toBe(constraint);
    });

    // A refund's columns take the same types as the payment's, each with its rule.
    it.each([
      ['amount_minor_units_check', `amount = 100000000`],
      ['currency_code_check', `currency = 'US1'`],
      ['refund_reason_check', `reason = 'changed_mind'`],
      ['metadata_object_check', `metadata = '["v"]'`],
      ['provider_reference_check', `provider_refund_id = ''`],
      ['failure_code_check', `failure_code = ''`],
      ['provider_version_check', `provider_version = -1`],
    ])('%s refuses a refund’s %s', async (constraint, assignment) => {
      const { payment } = await given.succeeded(clientId);
      const { refund } = await given.claimedRefund(payment, 100);

      const error = await set('refunds', refund.id, assignment).catch((thrown: unknown) => thrown);

      expect(error).toBeInstanceOf(QueryFailedError);
      expect(constraintOf(error)).toBe(constraint);
    });

    it.each([
      ['a non-ASCII key', 'clé'],
      ['a key with a control character', 'a\tb'],
      ['a blank key', '   '],
      ['a key of 256 characters', 'k'.repeat(256)],
    ])(
      'idempotency_key_check refuses %s',
      async (_case, key) => {
        const { lease } = await given.claimed(clientId);

        const error: unknown = await db.dataSource
          .query(`UPDATE idempotency_keys SET key = $1 WHERE client_id = $2 AND key = $3`, [key, clientId, lease.key])
          .catch((thrown: unknown) => thrown);

        expect((error as QueryFailedError & { driverError: { constraint?: string; code?: string } }).driverError).toMatchObject(
          key.length > 255 ? { code: '22001' } : { constraint: 'idempotency_key_check' },
        );
      },
    );

    it('idempotency_key_check takes 255 printable ASCII characters', async () => {
      const { lease } = await given.claimed(clientId);
      const key = ` ~${'k'.repeat(251)}~ `;

      await db.dataSource.query(`UPDATE idempotency_keys SET key = $1 WHERE client_id = $2 AND key = $3`, [key, clientId, lease.key]);

      expect(await db.dataSource.query(`SELECT length(key) AS length FROM idempotency_keys WHERE client_id = $1 AND key = $2`, [clientId, key])).toEqual([
        { length: 255 },
      ]);
    });

    it('takes every field at its limit', async () => {
      const { payment } = await given.claimed(clientId);

      await set(
        'payments',
        payment.id,
        `payment_method = repeat(U&'\\+01F600', 255), description = repeat(U&'\\2764\\FE0F', 250),
         order_id = repeat(U&'\\2764\\FE0F', 32),
         metadata = (SELECT jsonb_object_agg(repeat(U&'\\+01F600', 39) || i, repeat('v', 500)) FROM generate_series(1, 9) i),
         provider_charge_id = repeat('c', 255), failure_code = repeat('f', 100)`,
      );

      expect(await given.paymentById(payment.id)).toMatchObject({ orderId: '\u2764\ufe0f'.repeat(32) });
    });
  });

  it('inserts a pending payment and reads it back in the record’s shape', async () => {
    const { payment } = await given.claimed(clientId, 'k1', 'ord_1');

    expect(payment).toMatchObject({
      clientId,
      amount: 500,
      currency: 'USD',
      orderId: 'ord_1',
      metadata: { order: 'a' },
      status: 'pending',
      providerKey: `pk_${payment.id}`,
      providerChargeId: null,
      reconcileAttempts: 0,
      amountReserved: 0,
      amountRefunded: 0,
    });
    expect(payment.createdAt).toBeInstanceOf(Date);
    expect(await payments().findForClient(manager(), clientId, payment.id)).toEqual(payment);
  });

  it('keeps one payment that did not fail per order, and frees the order when it fails', async () => {
    const first = await given.claimed(clientId, 'k1', 'ord_1');

    const second = await given.claimed(clientId, 'k2', 'ord_1').catch((error: unknown) => error);
    expect(second).toBeInstanceOf(QueryFailedError);
    expect(isUniqueViolation(second, ACTIVE_ORDER_INDEX)).toBe(true);

    await given.transitioned(first.payment, {
      status: 'failed',
      providerId: 'ch_1',
      failureCode: 'card_declined',
      failureMessage: 'The card was declined.',
    });
    await expect(given.claimed(clientId, 'k3', 'ord_1')).resolves.toBeDefined();
  });

  describe('listForClient', () => {
    it('pages newest first after a cursor, scoped to the client', async () => {
      const made = [];
      for (let index = 0; index < 3; index++) made.push((await given.claimed(clientId)).payment.id);
      await given.claimed(await given.client());

      const first = await payments().listForClient(manager(), clientId, { limit: 2 });
      const second = await payments().listForClient(manager(), clientId, { limit: 2, startingAfter: made[1] });

      expect(first.payments.map((payment) => payment.id)).toEqual([made[2], made[1]]);
      expect(first.hasMore).toBe(true);
      expect(second.payments.map((payment) => payment.id)).toEqual([made[0]]);
      expect(second.hasMore).toBe(false);
    });
  });
});
