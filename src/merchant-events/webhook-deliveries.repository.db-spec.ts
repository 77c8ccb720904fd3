import { randomUUID } from 'node:crypto';
import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { type DeliveryClaim, WebhookDeliveriesRepository } from './webhook-deliveries.repository';

describe('WebhookDeliveriesRepository on Postgres', () => {
  const db = useLedgerFixtures();
  const deliveries = new WebhookDeliveriesRepository();
  let given: LedgerFixtures;

  beforeEach(() => {
    ({ given } = db);
  });

  const manager = () => db.dataSource.manager;
  const claimAll = (limit = 100, maxInFlightPerEndpoint = 100) =>
    deliveries.claimDue(manager(), { limit, maxInFlightPerEndpoint, claimMs: 60_000 });

  /** `count` succeeded payments of a new client with an endpoint: as many deliveries due now. */
  async function endpointWithDue(count: number): Promise<string> {
    const clientId = await given.clientWithWebhook();
    for (let i = 0; i < count; i++) await given.succeeded(clientId);
    return clientId;
  }

  async function row(claim: Pick<DeliveryClaim, 'eventId'>) {
    const [found] = await deliveries.list(manager(), { eventId: claim.eventId, limit: 1 });
    return found;
  }

  it('claims due deliveries once: a live claim is not claimed again, an expired one is, with a new token', async () => {
    await endpointWithDue(2);

    const first = await claimAll();
    expect(first).toHaveLength(2);
    expect(await claimAll()).toEqual([]);

    await db.dataSource.query(`UPDATE webhook_deliveries SET claimed_until = now() - interval '1 second' WHERE event_id = $1`, [
      first[0].eventId,
    ]);
    const again = await claimAll();
    expect(again.map((claim) => claim.eventId)).toEqual([first[0].eventId]);
    expect(again[0].claimToken).not.toBe(first[0].claimToken);
  });

  it('leaves an endpoint no more than its in-flight share, and puts every endpoint’s first delivery before anyone’s second', async () => {
    const busy = await endpointWithDue(6);
    const quiet = await endpointWithDue(1);
    const clientOf = async (claim: DeliveryClaim) => (await row(claim)).clientId;

    const firstRound = await deliveries.claimDue(manager(), { limit: 2, maxInFlightPerEndpoint: 3, claimMs: 60_000 });
    expect((await Promise.all(firstRound.map(clientOf))).sort()).toEqual([busy, quiet].sort());

    const secondRound = await claimAll(100, 3);
    expect(await Promise.all(secondRound.map(clientOf))).toEqual([busy, busy]);
    expect(await claimAll(100, 3)).toEqual([]);
  });

  it('never hands one delivery to two concurrent dispatches', async () => {
    await endpointWithDue(20);

    const rounds = await Promise.all([claimAll(), claimAll(), claimAll()]);

    const claimed = rounds.flat().map((claim) => claim.eventId);
    expect(claimed).toHaveLength(20);
    expect(new Set(claimed).size).toBe(20);
  });

  it('does not claim a delivery before its next attempt is due, nor a settled one', async () => {
    await endpointWithDue(3);
    const [later, delivered, failed] = await claimAll();
    await deliveries.recordFailure(manager(), later, { error: 'HTTP 500', retryInMs: 60_000, horizonHours: 72 });
    await deliveries.recordDelivered(manager(), delivered);
    await deliveries.recordFailure(manager(), failed, { error: 'HTTP 500', retryInMs: 60_000, horizonHours: 0.001 });

    await db.dataSource.query(`UPDATE webhook_deliveries SET claimed_until = NULL, claim_token = NULL WHERE status = 'pending'`);
    expect(await claimAll()).toEqual([]);
  });

  it('records a failure only under the claim that made the send, and fails the delivery past its horizon', async () => {
    await endpointWithDue(2);
    const [claim, other] = await claimAll();

    const stale = { ...claim, claimToken: randomUUID() };
    expect(await deliveries.recordFailure(manager(), stale, { error: 'HTTP 500', retryInMs: 1_000, horizonHours: 72 })).toBeUndefined();
    expect(await row(claim)).toMatchObject({ status: 'pending', attempts: 0, lastError: null });

    expect(await deliveries.recordFailure(manager(), claim, { error: 'HTTP 500', retryInMs: 1_000, horizonHours: 72 })).toBe('pending');
    const retried = await row(claim);
    expect(retried).toMatchObject({ status: 'pending', attempts: 1, lastError: 'HTTP 500', claimToken: null });
    expect(retried.nextAttemptAt.getTime()).toBeGreaterThan(Date.now());

    // 0.0001 hours is 360 ms: a retry in a minute falls past it.
    const horizon = { error: 'no answer within 100 ms', retryInMs: 60_000, horizonHours: 0.0001 };
    expect(await deliveries.recordFailure(manager(), other, horizon)).toBe('failed');
    expect(await row(other)).toMatchObject({ status: 'failed', attempts: 1, lastError: horizon.error, claimToken: null });
  });

  it('records a 2xx whoever holds the claim, once', async () => {
    await endpointWithDue(1);
    const [claim] = await claimAll();
    const superseded = { ...claim, claimToken: randomUUID() };

    expect(await deliveries.recordDelivered(manager(), superseded)).toBeInstanceOf(Date);
    expect(await deliveries.recordDelivered(manager(), claim)).toBeUndefined();
    expect(await deliveries.recordFailure(manager(), claim, { error: 'late', retryInMs: 1, horizonHours: 72 })).toBeUndefined();
    expect(await row(claim)).toMatchObject({ status: 'delivered', attempts: 1, claimToken: null, lastError: null });
  });

  it('finds a claimed delivery with its event and endpoint, and nothing under a lost claim', async () => {
    const clientId = await endpointWithDue(1);
    const [claim] = await claimAll();

    const found = await deliveries.findClaimed(manager(), claim);
    expect(found).toMatchObject({ url: 'http://127.0.0.1:9/hooks', attempts: 0, live: true, event: { id: claim.eventId, clientId } });
    expect(found?.sealedSecrets).toEqual([expect.stringMatching(/^v1\./)]);
    expect(await deliveries.findClaimed(manager(), { ...claim, claimToken: randomUUID() })).toBeUndefined();
  });
});
