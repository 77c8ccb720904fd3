import { Logger } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { CrashPoint } from '../common/crash-point';
import { DomainError, ErrorCode } from '../common/domain-error';
import { loadConfig } from '../config/app-config';
import { AnswerCache } from '../idempotency/answer-cache';
import type { KeyState } from '../ledger/idempotency.repository';
import { ledgerMocks, recordsOutcomes } from '../ledger/ledger.fixture';
import { Metrics } from '../metrics/metrics';
import { PAYMENTS } from '../ledger/operations';
import { IdempotentWrites } from '../operations/idempotent-writes';
import { type CreatePaymentCommand, PaymentCreationService } from './payment-creation.service';
import { aPayment } from '../ledger/payment.fixture';

const charge = { id: 'ch_1', status: 'succeeded' as const, amount: 500, currency: 'USD', failure_code: null };

/**
 * POST /v1/payments as it runs: the payment's own part (PaymentCreationService,
 * its claim) on the real flow every idempotent write shares (IdempotentWrites)
 * and the real ledger, over strict mocks of the repositories and the provider.
 */
function setup() {
  const { transaction, dataSource: source, keys, rows, payments, provider, config, ledger } = ledgerMocks();
  provider.unavailableForMs = jest.fn().mockReturnValue(0);
  const dataSource = { transaction };
  const metrics = new Metrics();
  const writes = new IdempotentWrites(source, keys, ledger, provider, config, new CrashPoint(config), new AnswerCache(config));
  const sut = new PaymentCreationService(source, payments, writes, metrics);
  // Unless a test says otherwise the key exists: the claim of a new key, tried first, leaves it alone.
  payments.insertPendingUnderClaim = jest.fn().mockResolvedValue(undefined);
  const command: CreatePaymentCommand = {
    clientId: 'client_1',
    idempotencyKeyHeader: 'key-1',
    fingerprint: 'f'.repeat(64),
    body: { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' },
    requestId: 'req_1',
  };
  return { sut, keys, rows, payments, provider, dataSource, metrics, command };
}

function existingKey(overrides: Partial<KeyState> = {}): KeyState {
  return { fingerprint: 'f'.repeat(64), resourceId: 'pay_1', leaseRemainingSeconds: 0, expired: false, expiresInMs: null, ...overrides };
}

async function domainCode(work: Promise<unknown>): Promise<ErrorCode> {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error.code;
}

describe('PaymentCreationService.create', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('claims, charges under the payment’s provider key and records the outcome: one statement, then another, no transaction', async () => {
    const { sut, rows, payments, provider, dataSource, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id, providerKey: row.providerKey }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = recordsOutcomes();

    const reply = await sut.create(command);

    expect(reply.status).toBe(201);
    expect(reply.headers).toEqual({});
    const paymentId = payments.insertPendingUnderClaim.mock.calls[0][1].id;
    expect(provider.createCharge).toHaveBeenCalledTimes(1);
    expect(provider.createCharge.mock.calls[0][0]).toMatchObject({
      providerKey: `pk_${paymentId}`,
      reference: paymentId,
    });
    expect(provider.createCharge.mock.calls[0][1]).toMatchObject({ clientId: 'client_1' });
    // The payment as phase 1 returned it, its outcome, and the response the key stores: the one the client gets.
    const payment = await payments.insertPendingUnderClaim.mock.results[0].value;
    expect(rows.recordOutcomeUnderLease).toHaveBeenCalledTimes(1);
    expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
      expect.anything(),
      PAYMENTS,
      expect.objectContaining({ key: 'key-1' }),
      payment,
      expect.objectContaining({
        outcome: { status: 'succeeded', providerId: 'ch_1' },
        answer: expect.objectContaining({ status: 201, ttlHours: 24 }),
      }),
    );
    const { response } = (await rows.recordOutcomeUnderLease.mock.results[0].value) as { response: unknown };
    expect(response).toEqual({ status: reply.status, body: reply.body });
    // A new key is claimed without being read first (keys.find is not stubbed), and no expired key is taken over by that claim.
    expect(payments.insertPendingUnderClaim).toHaveBeenCalledTimes(1);
    expect(payments.insertPendingUnderClaim.mock.calls[0][2]).toMatchObject({
      lease: { key: 'key-1' },
      fingerprint: command.fingerprint,
      orExpired: false,
    });
    expect(dataSource.transaction).not.toHaveBeenCalled();
  });

  it('replays a stored response from one read: no transaction, no claim, no provider', async () => {
    const { sut, keys, dataSource, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ response: { status: 402, body: '{"error":{}}' } }));

    const reply = await sut.create(command);

    expect(reply).toEqual({ status: 402, body: '{"error":{}}', headers: { 'Idempotent-Replayed': 'true' } });
    expect(dataSource.transaction).not.toHaveBeenCalled();
  });

  it('replays a payment it recorded itself without reading the key again, and refuses another body under that key', async () => {
    const { sut, keys, rows, payments, provider, metrics, command } = setup();
    keys.find = jest.fn().mockResolvedValue(undefined);
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id, providerKey: row.providerKey }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = recordsOutcomes();
    const first = await sut.create(command);
    keys.find.mockClear();

    const replay = await sut.create(command);
    const reused = sut.create({ ...command, fingerprint: 'e'.repeat(64) });

    expect(replay).toEqual({ ...first, headers: { 'Idempotent-Replayed': 'true' } });
    expect(await domainCode(reused)).toBe(ErrorCode.IdempotencyKeyReused);
    expect(keys.find).not.toHaveBeenCalled();
    expect(provider.createCharge).toHaveBeenCalledTimes(1);
    // Each answer carrying the payment is counted, the replay as such.
    const answers = (await metrics.paymentAnswers.get()).values.map(({ labels, value }) => [labels.status, labels.replayed, value]);
    expect(answers).toEqual([
      ['201', 'false', 1],
      ['201', 'true', 1],
    ]);
  });

  it('keeps a final answer read from the key, for as long as the key has left', async () => {
    const { sut, keys, command } = setup();
    const stored = { status: 201, body: '{"id":"pay_1"}' };
    keys.find = jest.fn().mockResolvedValue(existingKey({ response: stored, expiresInMs: 60_000 }));

    await sut.create(command);
    await sut.create(command);

    expect(keys.find).toHaveBeenCalledTimes(1);
  });

  it('does not keep an answer whose key has no retention left', async () => {
    const { sut, keys, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ response: { status: 201, body: '{}' }, expiresInMs: 0 }));

    await sut.create(command);
    await sut.create(command);

    expect(keys.find).toHaveBeenCalledTimes(2);
  });

  it('refuses another request under the same key even while the first is running (422 before 409)', async () => {
    const { sut, keys, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ fingerprint: 'e'.repeat(64), leaseRemainingSeconds: 20 }));

    expect(await domainCode(sut.create(command))).toBe(ErrorCode.IdempotencyKeyReused);
  });

  it('answers 409 while another request holds the lease, and takes nothing over', async () => {
    const { sut, keys, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ leaseRemainingSeconds: 12 }));

    expect(await domainCode(sut.create(command))).toBe(ErrorCode.IdempotencyKeyInUse);
  });

  it('settles a race for a new key at the claim: the loser finds the key taken, reads the winner’s lease and gets 409', async () => {
    const { sut, keys, payments, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ leaseRemainingSeconds: 30 }));

    expect(await domainCode(sut.create(command))).toBe(ErrorCode.IdempotencyKeyInUse);
    expect(payments.insertPendingUnderClaim).toHaveBeenCalledTimes(1);
    expect(keys.find).toHaveBeenCalledTimes(1);
    // provider.createCharge is not stubbed: the loser charged nothing.
  });

  it('claims a key read as new again when it vanished after the first claim found it (pruned meanwhile)', async () => {
    const { sut, keys, rows, payments, provider, command } = setup();
    keys.find = jest.fn().mockResolvedValue(undefined);
    payments.insertPendingUnderClaim = jest
      .fn()
      .mockResolvedValueOnce(undefined)
      .mockImplementation(async (_db, row, _claim) => aPayment({ id: row.id, providerKey: row.providerKey }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = recordsOutcomes();

    expect((await sut.create(command)).status).toBe(201);
    expect(payments.insertPendingUnderClaim.mock.calls.map(([, , claim]) => claim.orExpired)).toEqual([false, true]);
  });

  it('resumes an abandoned payment with its own provider key, never a new payment', async () => {
    const { sut, keys, rows, provider, command } = setup();
    const abandoned = aPayment({ id: 'pay_old', providerKey: 'pk_pay_old' });
    keys.find = jest.fn().mockResolvedValue(existingKey({ resourceId: 'pay_old' }));
    keys.takeOverLease = jest.fn().mockResolvedValue(true);
    rows.findForClient = jest.fn().mockResolvedValue(abandoned);
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'unknown', reason: 'HTTP 503', attempts: 3 });
    keys.release = jest.fn().mockResolvedValue(undefined);

    const reply = await sut.create(command);

    expect(provider.createCharge.mock.calls[0][0]).toMatchObject({ providerKey: 'pk_pay_old', reference: 'pay_old' });
    expect(reply.status).toBe(202);
    expect(JSON.parse(reply.body)).toMatchObject({ id: 'pay_old', status: 'pending' });
  });

  it.each([
    ['the outcome is unknown', { kind: 'unknown', reason: 'timeout', attempts: 3 }],
    ['the provider holds the charge as pending', { kind: 'answered', charge: { ...charge, status: 'pending' } }],
  ])('answers 202 and releases the key when %s, recording nothing', async (_name, result) => {
    const { sut, keys, payments, provider, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id }));
    provider.createCharge = jest.fn().mockResolvedValue(result);
    keys.release = jest.fn().mockResolvedValue(undefined);

    const reply = await sut.create(command);

    expect(reply.status).toBe(202);
    expect(reply.headers['Retry-After']).toMatch(/^\d+$/);
    expect(keys.release).toHaveBeenCalledTimes(1);
  });

  it('answers 202 and releases the key when the answer cannot be written, so the payment goes on to reconciliation', async () => {
    const { sut, keys, rows, payments, provider, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = jest.fn().mockRejectedValue(Object.assign(new Error('invalid byte sequence'), { code: '22021' }));
    keys.release = jest.fn().mockResolvedValue(true);

    const reply = await sut.create(command);

    expect(reply.status).toBe(202);
    expect(JSON.parse(reply.body)).toMatchObject({ status: 'pending' });
    expect(keys.release).toHaveBeenCalledWith(expect.anything(), expect.objectContaining({ key: 'key-1' }));
  });

  it('fails the request when even the release cannot be written: Postgres is down, not one answer', async () => {
    const { sut, keys, rows, payments, provider, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = jest.fn().mockRejectedValue(new Error('Connection terminated'));
    keys.release = jest.fn().mockRejectedValue(new Error('Connection terminated'));

    await expect(sut.create(command)).rejects.toThrow('Connection terminated');
  });

  it('writes nothing when its lease was taken over, and answers with what the new holder stored', async () => {
    const { sut, keys, rows, payments, provider, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
    rows.recordOutcomeUnderLease = jest.fn().mockResolvedValue({ kind: 'lease_lost' });
    keys.find = jest.fn().mockResolvedValue(existingKey({ response: { status: 201, body: '{"id":"pay_1"}' } }));

    const reply = await sut.create(command);

    expect(reply).toEqual({ status: 201, body: '{"id":"pay_1"}', headers: { 'Idempotent-Replayed': 'true' } });
  });

  it('makes no provider call after stalling past its lease, and answers with what the new holder stored', async () => {
    jest.useFakeTimers({ now: new Date('2026-11-29T10:00:00Z') });
    try {
      const { sut, keys, payments, command } = setup();
      payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => {
        // A stall (a long GC pause) inside phase 1, longer than the lease.
        jest.advanceTimersByTime(loadConfig({}).idempotency.leaseMs);
        return aPayment({ id: row.id });
      });
      keys.renewLease = jest.fn().mockResolvedValue(false);
      keys.find = jest.fn().mockResolvedValue(existingKey({ response: { status: 201, body: '{"id":"pay_1"}' } }));

      const reply = await sut.create(command);

      expect(reply).toEqual({ status: 201, body: '{"id":"pay_1"}', headers: { 'Idempotent-Replayed': 'true' } });
      expect(keys.renewLease).toHaveBeenCalledTimes(1);
      // provider.createCharge is not stubbed: a charge attempt would have thrown.
    } finally {
      jest.useRealTimers();
    }
  });

  it('maps the active-order index to order_already_paid', async () => {
    const { sut, payments, command } = setup();
    payments.insertPendingUnderClaim = jest.fn().mockRejectedValue(
      new QueryFailedError('INSERT', [], Object.assign(new Error('duplicate'), {
        code: '23505',
        constraint: 'payments_client_order_active_key',
      })),
    );

    expect(await domainCode(sut.create({ ...command, body: { ...command.body, order_id: 'ord_1' } }))).toBe(
      ErrorCode.OrderAlreadyPaid,
    );
  });

  it('reads the key header before touching the database', async () => {
    const { sut, command } = setup();
    expect(await domainCode(sut.create({ ...command, idempotencyKeyHeader: undefined }))).toBe(
      ErrorCode.IdempotencyKeyMissing,
    );
  });

  it('answers provider_unavailable with Retry-After while the circuit is open, before claiming anything', async () => {
    const { sut, keys, provider, dataSource, command } = setup();
    provider.unavailableForMs = jest.fn().mockReturnValue(4_200);
    keys.find = jest.fn().mockResolvedValue(undefined);

    const error = await sut.create(command).catch((thrown: unknown) => thrown);

    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({
      code: ErrorCode.ProviderUnavailable,
      message: 'The payment provider is unavailable; nothing was attempted. Retry later with the same Idempotency-Key.',
      details: { retryAfterSeconds: 5 },
    });
    expect(provider.unavailableForMs).toHaveBeenCalledWith('client_1'); // the circuits that hold for this client
    // keys.claim and provider.createCharge are not stubbed: reaching either would have thrown.
    expect(dataSource.transaction).not.toHaveBeenCalled();
  });

  it('still replays a finished payment while the circuit is open: a replay needs no provider', async () => {
    const { sut, keys, provider, command } = setup();
    provider.unavailableForMs = jest.fn().mockReturnValue(4_200);
    keys.find = jest.fn().mockResolvedValue(existingKey({ response: { status: 201, body: '{"id":"pay_1"}' } }));

    const reply = await sut.create(command);

    expect(reply).toEqual({ status: 201, body: '{"id":"pay_1"}', headers: { 'Idempotent-Replayed': 'true' } });
  });

  it('while the circuit is open, answers an unfinished payment with 202 as it is: a charge may exist', async () => {
    const { sut, keys, rows, provider, dataSource, command } = setup();
    provider.unavailableForMs = jest.fn().mockReturnValue(4_200);
    keys.find = jest.fn().mockResolvedValue(existingKey({ resourceId: 'pay_old' }));
    rows.findForClient = jest.fn().mockResolvedValue(aPayment({ id: 'pay_old' }));

    const reply = await sut.create(command);

    expect(reply.status).toBe(202);
    expect(reply.headers).toEqual({ 'Retry-After': '5' });
    expect(JSON.parse(reply.body)).toMatchObject({ id: 'pay_old', status: 'pending' });
    // keys.takeOverLease and provider.createCharge are not stubbed: nothing was taken or sent.
    expect(dataSource.transaction).not.toHaveBeenCalled();
  });

  it('while the circuit is open, replays a payment decided between the key read and the payment read', async () => {
    const { sut, keys, rows, provider, command } = setup();
    provider.unavailableForMs = jest.fn().mockReturnValue(4_200);
    const stored = { status: 201, body: '{"id":"pay_old"}' };
    // The first read of the key takes no lock: the worker completes key and payment in one commit just after it.
    keys.find = jest
      .fn()
      .mockResolvedValueOnce(existingKey({ resourceId: 'pay_old' }))
      .mockResolvedValueOnce(existingKey({ resourceId: 'pay_old', response: stored }));
    rows.findForClient = jest.fn().mockResolvedValue(aPayment({ id: 'pay_old', status: 'succeeded' }));

    const reply = await sut.create(command);

    expect(reply).toEqual({ ...stored, headers: { 'Idempotent-Replayed': 'true' } });
  });

  it('answers a retry of a payment in review with 202 and the payment as it is, and leaves it alone', async () => {
    const { sut, keys, rows, command } = setup();
    keys.find = jest.fn().mockResolvedValue(existingKey({ resourceId: 'pay_old' }));
    keys.takeOverLease = jest.fn().mockResolvedValue(true);
    rows.findForClient = jest.fn().mockResolvedValue(aPayment({ id: 'pay_old', status: 'requires_review' }));
    keys.release = jest.fn().mockResolvedValue(undefined);

    const reply = await sut.create(command);

    expect(reply.status).toBe(202);
    expect(reply.headers).toEqual({ 'Retry-After': '60' });
    expect(JSON.parse(reply.body)).toMatchObject({ id: 'pay_old', status: 'requires_review' });
    expect(keys.release).toHaveBeenCalledTimes(1);
    // provider.createCharge is not stubbed: a review is not the request's to resume.
  });

  it('answers 202 without storing it when the charge sends the payment to review', async () => {
    const { sut, rows, payments, provider, command } = setup();
    payments.insertPendingUnderClaim = jest.fn(async (_db, row, _claim) => aPayment({ id: row.id }));
    provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge: { ...charge, amount: 1 } });
    rows.recordOutcomeUnderLease = recordsOutcomes();

    const reply = await sut.create(command);

    expect(reply.status).toBe(202);
    expect(reply.headers).toEqual({ 'Retry-After': '60' });
    expect(JSON.parse(reply.body)).toMatchObject({ status: 'requires_review' });
    expect(rows.recordOutcomeUnderLease.mock.calls[0][4].answer).toBeUndefined();
  });

  it.each([
    ['a reused key', existingKey({ fingerprint: 'e'.repeat(64) }), ErrorCode.IdempotencyKeyReused],
    [
      'an expired key',
      existingKey({ expired: true, response: { status: 201, body: '{}' } }),
      ErrorCode.ProviderUnavailable,
    ],
  ])('while the circuit is open, answers %s as it would otherwise, writing nothing', async (_name, state, code) => {
    const { sut, keys, provider, command } = setup();
    provider.unavailableForMs = jest.fn().mockReturnValue(1_000);
    keys.find = jest.fn().mockResolvedValue(state);

    expect(await domainCode(sut.create(command))).toBe(code);
  });
});
