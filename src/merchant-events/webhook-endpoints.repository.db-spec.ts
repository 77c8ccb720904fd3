import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { ErrorCode } from '../common/domain-error';
import { SecretBox } from '../common/secret-box';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import type { CreateWebhookEndpointDto } from './webhook-endpoints.dto';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { createEndpoint } from './webhook-endpoints.service';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

describe('WebhookEndpointsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  const endpoints = new WebhookEndpointsRepository();
  const deliveries = new WebhookDeliveriesRepository();
  const box = new SecretBox({ key: SecretBox.newKey() });
  let given: LedgerFixtures;

  beforeEach(() => {
    ({ given } = db);
  });

  const manager = () => db.dataSource.manager;
  const create = (clientId: string, body: Partial<CreateWebhookEndpointDto> = {}) =>
    db.dataSource.transaction((tx) => createEndpoint(tx, { endpoints, box }, clientId, { url: 'http://127.0.0.1:9/hooks', ...body }));
  const deliveriesOf = async (eventIdOf: () => Promise<string>) => {
    const eventId = await eventIdOf();
    const rows = (await db.dataSource.query(`SELECT endpoint_id, status, last_error FROM webhook_deliveries WHERE event_id = $1 ORDER BY endpoint_id`, [
      eventId,
    ])) as { endpoint_id: string; status: string; last_error: string | null }[];
    return { eventId, rows };
  };
  const eventOf = (clientId: string, status: 'succeeded' | 'failed' = 'succeeded') => async () => {
    const { payment } = status === 'succeeded' ? await given.succeeded(clientId) : await declined(clientId);
    const [event] = (await db.dataSource.query(`SELECT id FROM events WHERE payment_id = $1`, [payment.id])) as { id: string }[];
    return event.id;
  };

  async function declined(clientId: string) {
    const { lease, payment } = await given.claimed(clientId);
    await given.decided(lease, payment, { status: 'failed', providerId: 'ch_2', failureCode: 'card_declined', failureMessage: 'declined' });
    return { payment };
  }

  it('lets 20 concurrent creations make exactly 16 endpoints, and a delete free a slot', async () => {
    const clientId = await given.client();

    const results = await Promise.allSettled(Array.from({ length: 20 }, () => create(clientId)));

    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(16);
    for (const refused of results.filter((result) => result.status === 'rejected')) {
      expect(refused.reason).toMatchObject({ code: ErrorCode.WebhookEndpointLimitReached });
    }
    expect(await endpoints.countLive(manager(), clientId)).toBe(16);
    const [first] = (await endpoints.listLive(manager(), clientId, { limit: 1 })).endpoints;
    expect(await endpoints.markDeleted(manager(), clientId, first.id)).toBe(true);
    await expect(create(clientId)).resolves.toMatchObject({ object: 'webhook_endpoint' });
    await expect(create(clientId)).rejects.toMatchObject({ code: ErrorCode.WebhookEndpointLimitReached });
  });

  it('keeps only the sealed secret: the row holds no trace of the secret shown', async () => {
    const clientId = await given.client();

    const created = await create(clientId);

    const [row] = (await db.dataSource.query(`SELECT to_jsonb(w)::text AS whole, secret_ciphertext FROM webhook_endpoints w WHERE id = $1`, [
      created.id,
    ])) as { whole: string; secret_ciphertext: string }[];
    expect(row.whole).not.toContain(created.secret.slice(6));
    expect(box.open(row.secret_ciphertext)).toBe(created.secret);
  });

  it('writes one delivery per enabled endpoint whose filter matches the event, and none to the others', async () => {
    const clientId = await given.client();
    const every = await create(clientId);
    const failures = await create(clientId, { enabled_events: ['payment.failed', 'refund.failed'] });
    const disabled = await create(clientId);
    await endpoints.update(manager(), clientId, disabled.id, { status: 'disabled' });
    const deleted = await create(clientId);
    await endpoints.markDeleted(manager(), clientId, deleted.id);
    const otherClient = await given.clientWithWebhook();

    expect((await deliveriesOf(eventOf(clientId, 'succeeded'))).rows.map((row) => row.endpoint_id)).toEqual([every.id]);
    expect((await deliveriesOf(eventOf(clientId, 'failed'))).rows.map((row) => row.endpoint_id)).toEqual([every.id, failures.id].sort());
    expect((await deliveriesOf(eventOf(otherClient))).rows).toHaveLength(1);
  });

  it('stops the pending deliveries of one endpoint and no other’s', async () => {
    const clientId = await given.client();
    const [a, b] = [await create(clientId), await create(clientId)];
    const { eventId } = await deliveriesOf(eventOf(clientId));

    expect(await deliveries.stopPending(manager(), { clientId, endpointId: a.id }, 'endpoint disabled')).toBe(1);

    const { rows } = await deliveriesOf(async () => eventId);
    expect(Object.fromEntries(rows.map((row) => [row.endpoint_id, [row.status, row.last_error]]))).toEqual({
      [a.id]: ['failed', 'endpoint disabled'],
      [b.id]: ['pending', null],
    });
  });

  it('redelivers a settled delivery to a live endpoint, and none to a disabled one', async () => {
    const clientId = await given.client();
    const [a, b] = [await create(clientId), await create(clientId)];
    const { eventId } = await deliveriesOf(eventOf(clientId));
    await deliveries.stopPending(manager(), { clientId, endpointId: a.id }, 'gave up');
    await db.dataSource.query(`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now() WHERE endpoint_id = $1`, [b.id]);
    await endpoints.update(manager(), clientId, b.id, { status: 'disabled' });

    const redelivered = await deliveries.redeliver(manager(), { clientId, eventId });

    expect(redelivered).toEqual([{ endpointId: a.id, previousStatus: 'failed' }]);
    const { rows } = await deliveriesOf(async () => eventId);
    expect(rows.map((row) => row.status)).toEqual(a.id < b.id ? ['pending', 'delivered'] : ['delivered', 'pending']);
    expect(await deliveries.redeliver(manager(), { clientId, eventId, endpointId: b.id })).toEqual([]);
  });

  it('signs with the rotated-out secret until it expires, and with none of another client’s', async () => {
    const clientId = await given.client();
    const endpoint = await create(clientId);
    const { eventId } = await deliveriesOf(eventOf(clientId));
    const [claim] = await deliveries.claimDue(manager(), { limit: 100, maxInFlightPerEndpoint: 100, claimMs: 60_000 });
    const next = 'whsec_Zm9yIHRoZSB0ZXN0OiBhIHNlY29uZCBzZWNyZXQ=';

    expect(await endpoints.rotateSecret(manager(), 'a0000000-0000-4000-8000-000000000000', endpoint.id, box.seal(next), 24)).toBeUndefined();
    await endpoints.rotateSecret(manager(), clientId, endpoint.id, box.seal(next), 24);
    const during = await deliveries.findClaimed(manager(), claim);
    expect(claim.eventId).toBe(eventId);
    expect(during?.sealedSecrets.map((sealed) => box.open(sealed))).toEqual([next, endpoint.secret]);

    await db.dataSource.query(`UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, [endpoint.id]);
    expect((await deliveries.findClaimed(manager(), claim))?.sealedSecrets.map((sealed) => box.open(sealed))).toEqual([next]);
    await endpoints.rotateSecret(manager(), clientId, endpoint.id, box.seal(endpoint.secret), 0);
    const [row] = (await db.dataSource.query(`SELECT previous_secret_ciphertext FROM webhook_endpoints WHERE id = $1`, [endpoint.id])) as {
      previous_secret_ciphertext: string | null;
    }[];
    expect(row.previous_secret_ciphertext).toBeNull();
  });

  it('claims a key with its answer once; an expired key is taken over, a live one is not', async () => {
    const clientId = await given.client();
    const keys = new IdempotencyRepository();
    const claim = { clientId, key: 'endpoint-key', fingerprint: 'a'.repeat(64), status: 201, body: '{"id":"we_1"}', ttlHours: 24 };

    expect(await keys.claimAnswered(manager(), claim)).toBe(true);
    expect(await keys.claimAnswered(manager(), { ...claim, fingerprint: 'b'.repeat(64) })).toBe(false);
    expect(await keys.find(manager(), clientId, claim.key)).toMatchObject({ fingerprint: claim.fingerprint, response: { status: 201, body: claim.body } });

    await db.dataSource.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`, [claim.key]);
    expect(await keys.claimAnswered(manager(), { ...claim, fingerprint: 'b'.repeat(64) })).toBe(true);
  });
});
