import dns from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { Webhook } from 'standardwebhooks';
import type { DataSource, EntityManager } from 'typeorm';
import type { CrashPoint } from '../common/crash-point';
import { strictMock } from '../common/strict-mock.fixture';
import { SecretBox } from '../common/secret-box';
import { loadConfig } from '../config/app-config';
import { Metrics } from '../metrics/metrics';
import { toResource } from '../ledger/payment-resource';
import { aPayment } from '../ledger/payment.fixture';
import type { EventRecord } from '../ledger/events.table';
import type { ClaimedDelivery, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookDispatcher } from './webhook-dispatcher.service';
import { webhookUrlRefusal } from './webhook-url-policy';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const CLAIM = { clientId: 'c1', eventId: 'evt_01M8SQ8YE7WBFM1V7CNVXBCFA3', endpointId: 'e1', claimToken: 't1' };

const event: EventRecord = {
  id: CLAIM.eventId,
  clientId: 'client_1',
  type: 'payment.succeeded',
  paymentId: 'pay_1',
  refundId: null,
  data: { object: toResource(aPayment({ status: 'succeeded' })) },
  createdAt: new Date('2026-11-29T09:00:01Z'),
  xactId: '1234',
};

/**
 * A merchant endpoint on loopback answering `status` (with `headers`),
 * keeping what it got and counting the connections that reached it.
 */
async function endpoint(
  status: number,
  headers: Record<string, string> = {},
): Promise<{ url: string; port: number; got: { headers: Record<string, string>; body: string }[]; connections: () => number; server: Server }> {
  const got: { headers: Record<string, string>; body: string }[] = [];
  let connections = 0;
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      got.push({ headers: request.headers as Record<string, string>, body });
      response.writeHead(status, headers).end();
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, port, got, connections: () => connections, server };
}

/** The endpoints of these tests are on loopback: allowed unless a test says otherwise. */
function setup(env: Record<string, string> = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }) {
  const db = {} as EntityManager;
  const dataSource = { manager: db } as unknown as DataSource;
  const deliveries = strictMock<WebhookDeliveriesRepository>('deliveries');
  const queue = strictMock<Queue>('queue');
  const crashPoint = { reach: jest.fn() } as unknown as jest.Mocked<CrashPoint>;
  const metrics = new Metrics();
  const config = loadConfig({ WEBHOOK_BATCH_SIZE: '10', WEBHOOK_BACKOFF_BASE_MS: '1000', WEBHOOK_TIMEOUT_MS: '500', ...env });
  const box = new SecretBox(config.secrets);
  const sut = new WebhookDispatcher(dataSource, deliveries, queue, config, metrics, crashPoint, box);
  const claimed = (url: string, attempts = 0): ClaimedDelivery => ({ event, url, sealedSecrets: [box.seal(SECRET)], live: true, attempts });
  return { sut, db, deliveries, queue, crashPoint, metrics, claimed, box };
}

describe('WebhookDispatcher', () => {
  describe('dispatch', () => {
    it('claims no more than the room left in the queue and queues each claim once, by its token', async () => {
      const { sut, db, deliveries, queue } = setup();
      queue.getWaitingCount = jest.fn().mockResolvedValue(7);
      deliveries.claimDue = jest.fn().mockResolvedValue([CLAIM]);
      queue.addBulk = jest.fn().mockResolvedValue([]);

      await expect(sut.dispatch()).resolves.toBe(1);

      expect(deliveries.claimDue).toHaveBeenCalledWith(db, { limit: 3, maxInFlightPerEndpoint: 4, claimMs: 6_000 });
      expect(queue.addBulk).toHaveBeenCalledWith([
        { name: 'deliver', data: CLAIM, opts: { jobId: 'deliver-t1', removeOnComplete: true, removeOnFail: true } },
      ]);
    });

    it('claims nothing while the queue is full', async () => {
      const { sut, queue } = setup();
      queue.getWaitingCount = jest.fn().mockResolvedValue(10);

      await expect(sut.dispatch()).resolves.toBe(0);
    });
  });

  describe('deliver', () => {
    const servers: Server[] = [];
    afterAll(() => servers.forEach((server) => server.close()));

    it('sends the event signed, with webhook-id the event id and the event resource as body, then records the 2xx', async () => {
      const { sut, db, deliveries, crashPoint, metrics, claimed } = setup();
      const merchant = await endpoint(204);
      servers.push(merchant.server);
      deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(merchant.url));
      deliveries.recordDelivered = jest.fn().mockResolvedValue(new Date());

      await expect(sut.deliver(CLAIM)).resolves.toBe('delivered');

      const [{ headers, body }] = merchant.got;
      expect(headers['webhook-id']).toBe(event.id);
      expect(new Webhook(SECRET).verify(body, headers)).toEqual(JSON.parse(body));
      expect(JSON.parse(body)).toEqual({ id: event.id, object: 'event', type: 'payment.succeeded', created_at: '2026-11-29T09:00:01.000Z', data: event.data });
      expect(deliveries.recordDelivered).toHaveBeenCalledWith(db, CLAIM);
      expect(crashPoint.reach).toHaveBeenCalledWith('worker_mid_delivery', { eventId: event.id });
      expect((await metrics.webhookAttempts.get()).values).toEqual([expect.objectContaining({ labels: { result: 'delivered' }, value: 1 })]);
    });

    it('records a failure with the next attempt on the backoff ladder and the horizon, under the claim', async () => {
      const { sut, db, deliveries, claimed } = setup({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_HORIZON_HOURS: '2' });
      const merchant = await endpoint(503);
      servers.push(merchant.server);
      deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(merchant.url, 3));
      deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

      await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

      // Attempt 4 failed: equal jitter on base·2^3 = 8 s.
      const [, , failure] = deliveries.recordFailure.mock.calls[0];
      expect(deliveries.recordFailure).toHaveBeenCalledWith(db, CLAIM, { error: 'HTTP 503', retryInMs: expect.any(Number), horizonHours: 2 });
      expect(failure.retryInMs).toBeGreaterThanOrEqual(4_000);
      expect(failure.retryInMs).toBeLessThan(8_000);
    });

    it('says failed when the horizon has passed, and names a refused connection', async () => {
      const { sut, deliveries, claimed } = setup();
      const closed = await endpoint(204);
      await new Promise((done) => closed.server.close(done));
      deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(closed.url));
      deliveries.recordFailure = jest.fn().mockResolvedValue('failed');

      await expect(sut.deliver(CLAIM)).resolves.toBe('failed');

      expect(deliveries.recordFailure.mock.calls[0][2].error).toMatch(/ECONNREFUSED/);
    });

    it('counts a delivery it cannot sign as a failed attempt, so it reaches its horizon instead of being claimed for ever', async () => {
      const { sut, deliveries, claimed } = setup();
      const merchant = await endpoint(204);
      servers.push(merchant.server);
      deliveries.findClaimed = jest.fn().mockResolvedValue({ ...claimed(merchant.url), sealedSecrets: ['v1.00000000.AAAA'] });
      deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

      await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

      expect(deliveries.recordFailure.mock.calls[0][2].error).toMatch(/^not signed: /);
      expect(merchant.got).toEqual([]);
    });

    it('signs with the rotated-out secret too while it has not expired: a receiver holding either verifies', async () => {
      const { sut, deliveries, claimed, box } = setup();
      const merchant = await endpoint(204);
      servers.push(merchant.server);
      const next = 'whsec_Zm9yIHRoZSB0ZXN0OiBhIHNlY29uZCBzZWNyZXQ=';
      deliveries.findClaimed = jest.fn().mockResolvedValue({ ...claimed(merchant.url), sealedSecrets: [box.seal(next), box.seal(SECRET)] });
      deliveries.recordDelivered = jest.fn().mockResolvedValue(new Date());

      await expect(sut.deliver(CLAIM)).resolves.toBe('delivered');

      const [{ headers, body }] = merchant.got;
      expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
      expect(new Webhook(SECRET).verify(body, headers)).toEqual(JSON.parse(body));
      expect(new Webhook(next).verify(body, headers)).toEqual(JSON.parse(body));
    });

    it('stops, and does not send, a delivery whose endpoint was disabled or deleted after it was written', async () => {
      const { sut, db, deliveries, claimed } = setup();
      const merchant = await endpoint(204);
      servers.push(merchant.server);
      deliveries.findClaimed = jest.fn().mockResolvedValue({ ...claimed(merchant.url), live: false });
      deliveries.stopPending = jest.fn().mockResolvedValue(1);

      await expect(sut.deliver(CLAIM)).resolves.toBe('skipped');

      expect(deliveries.stopPending).toHaveBeenCalledWith(db, CLAIM, 'endpoint disabled or deleted');
      expect(merchant.got).toEqual([]);
    });

    describe('where it sends', () => {
      afterEach(() => jest.restoreAllMocks());

      /** The system resolver answering each lookup with the next of `answers` (the last one from then on). */
      function dnsAnswers(...answers: string[]) {
        let call = 0;
        return jest.spyOn(dns, 'lookup').mockImplementation(((_host: string, _options: unknown, callback: (...args: unknown[]) => void) => {
          const address = answers[Math.min(call++, answers.length - 1)];
          callback(null, [{ address, family: 4 }]);
        }) as unknown as typeof dns.lookup);
      }

      it('refuses a name that resolved public at registration and resolves to loopback at delivery, and never connects', async () => {
        const { sut, deliveries, claimed } = setup({});
        const merchant = await endpoint(204);
        servers.push(merchant.server);
        const url = `http://rebinding.example:${merchant.port}/hooks`;
        // Public when registered (resolved only: nothing connects to it), the merchant's listener on loopback by delivery time.
        dnsAnswers('93.184.215.14', '127.0.0.1');
        await expect(webhookUrlRefusal(url, { allowPrivate: false })).resolves.toBeUndefined();
        deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(url));
        deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

        await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

        expect(deliveries.recordFailure.mock.calls[0][2].error).toBe('address 127.0.0.1 is loopback: refused');
        expect(merchant.connections()).toBe(0);
      });

      it('refuses a private address written in the URL, without connecting', async () => {
        const { sut, deliveries, claimed } = setup({});
        const merchant = await endpoint(204);
        servers.push(merchant.server);
        deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(merchant.url));
        deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

        await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

        expect(deliveries.recordFailure.mock.calls[0][2].error).toBe('address 127.0.0.1 is loopback: refused');
        expect(merchant.connections()).toBe(0);
      });

      it('does not follow a redirect: the 3xx is a failed attempt, and its target gets nothing', async () => {
        // Time for a first connection on a busy machine: a timeout here would say nothing of redirects.
        const { sut, deliveries, claimed } = setup({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_TIMEOUT_MS: '5000' });
        const target = await endpoint(204);
        const redirecting = await endpoint(302, { location: target.url });
        servers.push(target.server, redirecting.server);
        deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(redirecting.url));
        deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

        await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

        expect(deliveries.recordFailure.mock.calls[0][2].error).toBe('HTTP 302 (redirects are not followed)');
        expect(redirecting.got).toHaveLength(1);
        expect(target.connections()).toBe(0);
      });

      it('refuses a stored URL with credentials, and neither its record nor its log line holds them', async () => {
        const { sut, deliveries, claimed } = setup();
        const merchant = await endpoint(204);
        servers.push(merchant.server);
        const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
        deliveries.findClaimed = jest.fn().mockResolvedValue(claimed(`http://merchant:hunter2@127.0.0.1:${merchant.port}/hooks`));
        deliveries.recordFailure = jest.fn().mockResolvedValue('pending');

        await expect(sut.deliver(CLAIM)).resolves.toBe('retry');

        expect(deliveries.recordFailure.mock.calls[0][2].error).toBe('URL carries credentials: refused');
        expect(warn).toHaveBeenCalledWith(expect.objectContaining({ failure: 'URL carries credentials: refused' }));
        expect(JSON.stringify([deliveries.recordFailure.mock.calls, warn.mock.calls])).not.toMatch(/hunter2|merchant:/);
        expect(merchant.connections()).toBe(0);
      });
    });

    it('sends nothing for a claim that was lost, or a delivery already settled', async () => {
      const { sut, deliveries, crashPoint } = setup();
      deliveries.findClaimed = jest.fn().mockResolvedValue(undefined);

      await expect(sut.deliver(CLAIM)).resolves.toBe('skipped');

      expect(crashPoint.reach).not.toHaveBeenCalled();
    });
  });
});
