import type { DataSource } from 'typeorm';
import { Webhook } from 'standardwebhooks';
import { DomainError, ErrorCode } from '../common/domain-error';
import { signedWebhookRequest } from '../common/signed-webhook';
import { loadConfig } from '../config/app-config';
import type { Ledger } from '../ledger/ledger.service';
import type { PaymentsRepository } from '../ledger/payments.repository';
import { Metrics } from '../metrics/metrics';
import type { ProcessedMessagesRepository } from './processed-messages.repository';
import { ProviderEventsService } from './provider-events.service';

const SECRET = 'whsec_3fulLzZy+ihVtzUO9c06pgtiuqco2ZNO';

function setup() {
  const transaction = jest.fn();
  const findByProviderKey = jest.fn();
  const metrics = new Metrics();
  const sut = new ProviderEventsService(
    { manager: {}, transaction } as unknown as DataSource,
    {} as ProcessedMessagesRepository,
    { findByProviderKey } as unknown as PaymentsRepository,
    {} as Ledger,
    metrics,
    loadConfig({ PROVIDER_WEBHOOK_SECRET: SECRET }),
  );
  const counted = async (result: string) =>
    (await metrics.providerEvents.get()).values.find((value) => value.labels.result === result)?.value ?? 0;
  return { sut, transaction, findByProviderKey, counted };
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
  describe('refund events, read and not applied yet', () => {
    it.each(['refund.pending', 'refund.succeeded', 'refund.failed'])(
      'acknowledges a well-signed %s event as ignored, counted, and touches no table',
      async (type) => {
        const { sut, transaction, findByProviderKey, counted } = setup();
        const { bytes, body, headers } = signed(refundEvent(type));

        const result = await sut.receive(bytes, body, headers);

        expect(result).toBe('ignored');
        expect(await counted('ignored')).toBe(1);
        expect(findByProviderKey).not.toHaveBeenCalled();
        expect(transaction).not.toHaveBeenCalled();
      },
    );

    it('refuses a well-signed refund event it cannot read, as it does a charge event', async () => {
      const { sut, transaction, findByProviderKey, counted } = setup();
      const malformed = refundEvent('refund.succeeded');
      malformed.data.amount = 0;
      const { bytes, body, headers } = signed(malformed);

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.ParameterInvalid);
      expect(await counted('ignored')).toBe(0);
      expect(findByProviderKey).not.toHaveBeenCalled();
      expect(transaction).not.toHaveBeenCalled();
    });

    it('still refuses a refund event whose signature does not verify', async () => {
      const { sut, counted } = setup();
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'), `whsec_${Buffer.alloc(24, 7).toString('base64')}`);

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.WebhookSignatureInvalid);
      expect(await counted('rejected')).toBe(1);
      expect(await counted('ignored')).toBe(0);
    });

    it('still refuses a refund event signed under another webhook-id', async () => {
      const { sut, counted } = setup();
      const { bytes, body, headers } = signed(refundEvent('refund.succeeded'), SECRET, 'evt_other');

      const error = await refusal(() => sut.receive(bytes, body, headers));

      expect(error.code).toBe(ErrorCode.ParameterInvalid);
      expect(await counted('ignored')).toBe(0);
    });
  });
});
