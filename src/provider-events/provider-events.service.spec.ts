import type { DataSource, EntityManager } from 'typeorm';
import { Webhook } from 'standardwebhooks';
import { DomainError, ErrorCode } from '../common/domain-error';
import { signedWebhookRequest } from '../common/signed-webhook';
import { loadConfig } from '../config/app-config';
import type { Ledger } from '../ledger/ledger.service';
import { REFUNDS } from '../ledger/operations';
import type { OperationsRepository } from '../ledger/operations.repository';
import { aRefund } from '../ledger/refund.fixture';
import { Metrics } from '../metrics/metrics';
import type { ProcessedMessagesRepository } from './processed-messages.repository';
import { ProviderEventsService } from './provider-events.service';

const SECRET = 'whsec_3fulLzZy+ihVtzUO9c06pgtiuqco2ZNO';

function setup() {
  const manager = {} as EntityManager;
  const tx = {} as EntityManager;
  const transaction = jest.fn((work: (db: EntityManager) => unknown) => work(tx));
  const findByProviderKey = jest.fn().mockResolvedValue(undefined);
  const findForClient = jest.fn();
  const record = jest.fn();
  const applyProviderEvent = jest.fn();
  const metrics = new Metrics();
  const sut = new ProviderEventsService(
    { manager, transaction } as unknown as DataSource,
    { record } as unknown as ProcessedMessagesRepository,
    { findByProviderKey, findForClient } as unknown as OperationsRepository,
    { applyProviderEvent } as unknown as Ledger,
    metrics,
    loadConfig({ PROVIDER_WEBHOOK_SECRET: SECRET }),
  );
  const counted = async (result: string) =>
    (await metrics.providerEvents.get()).values.find((value) => value.labels.result === result)?.value ?? 0;
  return { sut, manager, tx, transaction, findByProviderKey, findForClient, record, applyProviderEvent, counted };
}

const refundEvent = (type: string) => ({
  id: 'evt_refund_1',
  type,
  created_at: '2026-01-01T00:00:00.000Z',
  data: {
    id: 'rf_1',
    object: 'refund',
    charge: 'ch_1',
    amount: 400,
    currency: 'EUR',
    status: type.slice('refund.'.length),
    failure_code: null,
    reference: 're_1',
    idempotency_key: 'rk_1',
    created_at: '2026-01-01T00:00:00.000Z',
    provider_key: 'rk_1',
    version: 1,
  },
});

function signed(body: object, secret = SECRET, id = 'evt_refund_1') {
  const request = signedWebhookRequest(new Webhook(secret), id, JSON.stringify(body), new Date());
  return { bytes: Buffer.from(request.body), body, headers: request.headers };
}

async function refusal(call: () => Promise<unknown>): Promise<DomainError> {
  const error: unknown = await call().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (error instanceof DomainError) return error;
  throw new Error(`expected a DomainError, got ${String(error)}`);
}

describe(ProviderEventsService.name, () => {
  describe('refund events, applied as charge events are', () => {
    it.each(['refund.pending', 'refund.succeeded', 'refund.failed'])(
      'answers a well-signed %s event for no refund of ours unknown_refund, counted, and opens no transaction',
      async (type) => {
        const { sut, manager, transaction, findByProviderKey, counted } = setup();
        const { bytes, body, headers } = signed(refundEvent(type));

        const result = await sut.receive(bytes, body, headers);

        expect(result).toBe('unknown_refund');
        expect(await counted('unknown_refund')).toBe(1);
        // Looked up among refunds, by the refund's own provider key.
        expect(findByProviderKey).toHaveBeenCalledWith(manager, REFUNDS, 'rk_1');
        expect(transaction).not.toHaveBeenCalled();
      },
    );

    it('applies a refund event to its refund through the ledger, in one transaction with its processed record', async () => {
      const { sut, tx, findByProviderKey, findForClient, record, applyProviderEvent, counted } = setup();
      const refund = aRefund({ amount: 400, currency: 'EUR', providerKey: 'rk_1' });
      findByProviderKey.mockResolvedValue({ clientId: refund.clientId, id: refund.id });
      record.mockResolvedValue(true);
      findForClient.mockResolvedValue(refund);
      applyProviderEvent.mockResolvedValue('applied');
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'));

      const result = await sut.receive(bytes, body, headers);

      expect(result).toBe('applied');
      expect(await counted('applied')).toBe(1);
      expect(record).toHaveBeenCalledWith(tx, refund.clientId, 'provider-events', 'evt_refund_1');
      expect(findForClient).toHaveBeenCalledWith(tx, REFUNDS, { clientId: refund.clientId, id: refund.id });
      expect(applyProviderEvent).toHaveBeenCalledWith(tx, REFUNDS, refund, {
        version: 1,
        outcome: { status: 'succeeded', providerId: 'rf_1' },
      });
    });

    it('never takes a refund event for another amount as the outcome: the version only', async () => {
      const { sut, tx, findByProviderKey, findForClient, record, applyProviderEvent } = setup();
      const refund = aRefund({ amount: 300, providerKey: 'rk_1' });
      findByProviderKey.mockResolvedValue({ clientId: refund.clientId, id: refund.id });
      record.mockResolvedValue(true);
      findForClient.mockResolvedValue(refund);
      applyProviderEvent.mockResolvedValue('noted');
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'));

      expect(await sut.receive(bytes, body, headers)).toBe('noted');
      expect(applyProviderEvent).toHaveBeenCalledWith(tx, REFUNDS, refund, { version: 1, outcome: undefined });
    });

    it('refuses a well-signed refund event it cannot read, as it does a charge event', async () => {
      const { sut, transaction, findByProviderKey, counted } = setup();
      const malformed = refundEvent('refund.succeeded');
      malformed.data.amount = 0;
      const { bytes, body, headers } = signed(malformed);

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.ParameterInvalid);
      expect(await counted('unknown_refund')).toBe(0);
      expect(findByProviderKey).not.toHaveBeenCalled();
      expect(transaction).not.toHaveBeenCalled();
    });

    it('still refuses a refund event whose signature does not verify', async () => {
      const { sut, findByProviderKey, counted } = setup();
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'), `whsec_${Buffer.alloc(24, 7).toString('base64')}`);

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.WebhookSignatureInvalid);
      expect(await counted('rejected')).toBe(1);
      expect(await counted('unknown_refund')).toBe(0);
      expect(findByProviderKey).not.toHaveBeenCalled();
    });

    it('still refuses a refund event signed under another webhook-id', async () => {
      const { sut, findByProviderKey, counted } = setup();
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'), SECRET, 'evt_other');

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.ParameterInvalid);
      expect(await counted('unknown_refund')).toBe(0);
      expect(findByProviderKey).not.toHaveBeenCalled();
    });
  });
});
