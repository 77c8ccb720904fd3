import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { Webhook } from 'standardwebhooks';
import { DataSource } from 'typeorm';
import type { Agent } from 'undici';
import { CrashPoint } from '../common/crash-point';
import { errorForLog } from '../common/log-safety';
import { SecretBox } from '../common/secret-box';
import { type SignedRequest, postSignedWebhook, signedWebhookRequest } from '../common/signed-webhook';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Metrics } from '../metrics/metrics';
import { outsideTraces } from '../tracing/tracing';
import { backoffDelayMs } from '../provider/retry-policy';
import { toEventResource } from './event';
import { type ClaimedDelivery, type DeliveryClaim, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WEBHOOKS_QUEUE, WebhookJobName } from './webhooks.constants';
import { type WebhookUrlPolicy, deliveryRefusal, webhookAgent } from './webhook-url-policy';

type DeliverResult = 'delivered' | 'retry' | 'failed' | 'skipped';

/**
 * Pushes every event to each of its client's webhook endpoints that asked
 * for it, at least once, each delivery on its own.
 *
 * Each dispatch claims due deliveries in Postgres and queues one job per
 * claim; each job sends once and records what came of it. A worker killed
 * mid-send, or Redis losing the job, leaves the claim to expire and the next
 * dispatch claims the delivery again: the merchant may get an event twice,
 * always under the same webhook-id, and never loses one.
 */
@Injectable()
export class WebhookDispatcher implements OnModuleDestroy {
  private readonly logger = new Logger(WebhookDispatcher.name);
  private readonly policy: WebhookUrlPolicy;
  /** Every send's connections: each checks the addresses it connects to (see webhook-url-policy.ts). */
  private readonly agent: Agent;

  constructor(
    private readonly dataSource: DataSource,
    private readonly deliveries: WebhookDeliveriesRepository,
    @InjectQueue(WEBHOOKS_QUEUE) private readonly queue: Queue,
    @InjectConfig() private readonly config: AppConfig,
    private readonly metrics: Metrics,
    private readonly crashPoint: CrashPoint,
    private readonly box: SecretBox,
  ) {
    this.policy = { allowPrivate: config.webhooks.allowPrivateUrls };
    this.agent = webhookAgent(this.policy);
  }

  /** Its kept-alive connections to merchants end with the worker, as the provider client's do. */
  async onModuleDestroy(): Promise<void> {
    await this.agent.close();
  }

  /**
   * Claims what is due, up to the room left in the queue: sends waiting
   * behind slow ones would outlive their claims and be claimed again. The
   * job id is the claim's token: a claim is queued once.
   */
  async dispatch(): Promise<number> {
    const { batchSize, maxInFlightPerEndpoint } = this.config.webhooks;
    const room = batchSize - (await this.queue.getWaitingCount());
    if (room <= 0) return 0;
    const claims = await this.deliveries.claimDue(this.dataSource.manager, {
      limit: room,
      maxInFlightPerEndpoint,
      claimMs: claimMsFor(this.config),
    });
    if (claims.length === 0) return 0;
    await this.queue.addBulk(
      claims.map((claim) => ({
        name: WebhookJobName.Deliver,
        data: claim,
        opts: { jobId: `deliver-${claim.claimToken}`, removeOnComplete: true, removeOnFail: true },
      })),
    );
    return claims.length;
  }

  /** One send of one claimed delivery, and its record. */
  async deliver(claim: DeliveryClaim): Promise<DeliverResult> {
    const db = this.dataSource.manager;
    const delivery = await this.deliveries.findClaimed(db, claim);
    if (!delivery) return 'skipped';
    if (!delivery.live) {
      // Disabled or deleted since the delivery was written (the change stopped
      // the pending ones it saw; this one committed just after): not sent.
      await this.deliveries.stopPending(db, claim, 'endpoint disabled or deleted');
      return 'skipped';
    }
    const { timeoutMs, backoffBaseMs, backoffCapMs, retryHorizonHours } = this.config.webhooks;
    const failure = await this.send(delivery, timeoutMs);
    this.crashPoint.reach('worker_mid_delivery', { eventId: claim.eventId });
    if (failure === undefined) {
      const committedAt = await this.deliveries.recordDelivered(db, claim);
      if (!committedAt) return 'skipped';
      this.metrics.webhookAttempts.inc({ result: 'delivered' });
      this.metrics.webhookDeliveryLatency.observe((Date.now() - committedAt.getTime()) / 1000);
      return 'delivered';
    }
    const retryInMs = backoffDelayMs({ variant: 'equal', baseMs: backoffBaseMs, capMs: backoffCapMs }, delivery.attempts);
    const status = await this.deliveries.recordFailure(db, claim, {
      error: failure,
      retryInMs,
      horizonHours: retryHorizonHours,
    });
    if (!status) return 'skipped';
    const result = status === 'failed' ? 'failed' : 'retry';
    this.metrics.webhookAttempts.inc({ result });
    this.logger.warn({
      msg: result === 'failed' ? 'webhook delivery failed for good' : 'webhook delivery failed; will retry',
      eventId: claim.eventId,
      attempt: delivery.attempts + 1,
      failure,
      ...(result === 'retry' && { retryInMs: Math.round(retryInMs) }),
    });
    return result;
  }

  /**
   * One signed POST: undefined when the endpoint took it, or why not. During
   * a rotation it carries a signature per secret, the new one first. A
   * delivery that cannot even be signed (a secret the signer refuses, or one
   * sealed under a key this process does not hold), or whose URL or address
   * is refused, is a failed attempt like any other, recorded and retried to
   * its horizon: were it thrown, its job would fail and the expired claim be
   * taken again for ever, without an attempt ever counted.
   */
  private async send(delivery: ClaimedDelivery, timeoutMs: number): Promise<string | undefined> {
    const refusal = deliveryRefusal(delivery.url, this.policy);
    if (refusal !== undefined) return refusal;
    let request: SignedRequest;
    try {
      request = signedWebhookRequest(
        delivery.sealedSecrets.map((sealed) => new Webhook(this.box.open(sealed))),
        delivery.event.id,
        JSON.stringify(toEventResource(delivery.event)),
        new Date(),
      );
    } catch (error) {
      return `not signed: ${errorForLog(error).message ?? 'unknown error'}`;
    }
    // The merchant is another party: our trace context is not sent to it.
    return outsideTraces(() => postSignedWebhook(delivery.url, request, { timeoutMs, dispatcher: this.agent }));
  }
}

/**
 * How long a claim holds a delivery: the send's timeout, and room for the job
 * to wait its turn. Past it, the delivery is claimed again, so it is also how
 * long a delivery whose worker died waits to be sent again.
 */
export function claimMsFor(config: AppConfig): number {
  return 2 * config.webhooks.timeoutMs + 5_000;
}
