import { type ArgumentsHost, Logger } from '@nestjs/common';
import { keyInUse, keyReused } from '../idempotency/idempotency.errors';
import { Metrics } from '../metrics/metrics';
import { DomainError, ErrorCode } from './domain-error';
import { ErrorEnvelopeFilter } from './error-envelope.filter';

/** The filter answering `exception` on a response that has (or has not) started. */
function answer(metrics: Metrics, exception: unknown, headersSent = false) {
  const response = {
    headersSent,
    destroy: jest.fn(),
    status: jest.fn().mockReturnThis(),
    set: jest.fn().mockReturnThis(),
    type: jest.fn().mockReturnThis(),
    send: jest.fn().mockReturnThis(),
  };
  const request = { method: 'POST', path: '/v1/payments', headers: {} };
  const host = { switchToHttp: () => ({ getRequest: () => request, getResponse: () => response }) } as unknown as ArgumentsHost;
  new ErrorEnvelopeFilter(() => [], metrics).catch(exception, host);
  return response;
}

async function conflicts(metrics: Metrics): Promise<Record<string, number>> {
  const { values } = await metrics.idempotencyConflicts.get();
  return Object.fromEntries(values.map(({ labels, value }) => [String(labels.code), value]));
}

describe('ErrorEnvelopeFilter', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('counts every 409 idempotency_key_in_use and 422 idempotency_key_reused it answers, by code', async () => {
    const metrics = new Metrics();

    expect(answer(metrics, keyInUse()).status).toHaveBeenCalledWith(409);
    expect(answer(metrics, keyReused()).status).toHaveBeenCalledWith(422);
    answer(metrics, keyReused());

    expect(await conflicts(metrics)).toEqual({ idempotency_key_in_use: 1, idempotency_key_reused: 2 });
  });

  it('counts no other error, and none it could not answer (the response had started)', async () => {
    const metrics = new Metrics();

    answer(metrics, new DomainError(ErrorCode.OrderAlreadyPaid, 'paid'));
    answer(metrics, new Error('boom'));
    const cut = answer(metrics, keyInUse(), true);

    expect(cut.destroy).toHaveBeenCalled();
    expect(await conflicts(metrics)).toEqual({ idempotency_key_in_use: 0, idempotency_key_reused: 0 });
  });
});
