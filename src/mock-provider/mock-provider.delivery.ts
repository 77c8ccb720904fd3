import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { randomInt } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { postSignedWebhook } from '../common/signed-webhook';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { backoffDelayMs } from '../provider/retry-policy';
import { signedDelivery } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type { ProviderEvent } from './mock-provider.types';

const BACKOFF = { variant: 'full', baseMs: 100, capMs: 3_000 } as const;
const ATTEMPT_TIMEOUT_MS = 5_000;
/** Requests in flight at once; waits between attempts hold no slot, so a failing receiver blocks nobody. */
const MAX_IN_FLIGHT = 16;

/**
 * Delivers each event to PROVIDER_WEBHOOK_URL at least once: retries until a
 * 2xx, every event on its own, with no limit on attempts (a real processor
 * gives up after days; a test stack never runs that long). The acknowledgement
 * is journaled; an event whose delivery a shutdown interrupted is redelivered
 * by the next start.
 */
@Injectable()
export class EventDelivery implements OnModuleDestroy {
  private readonly logger = new Logger(EventDelivery.name);
  private readonly stopping = new AbortController();
  private readonly webhook: Webhook;
  private inFlight = 0;
  private readonly waitingForSlot: (() => void)[] = [];

  constructor(
    private readonly store: MockProviderStore,
    @InjectConfig() private readonly config: AppConfig,
  ) {
    this.webhook = new Webhook(config.providerEvents.secret);
  }

  /** Returns at once: the delivery runs on its own. Without a webhook URL, or once stopping, does nothing. */
  deliver(event: ProviderEvent): void {
    const url = this.config.mockProvider.webhookUrl;
    if (url === undefined || this.stopping.signal.aborted) return;
    void this.run(url, event);
  }

  onModuleDestroy(): void {
    this.stopping.abort();
  }

  private async run(url: string, event: ProviderEvent): Promise<void> {
    try {
      await this.untilAcknowledged(url, event, () => this.store.countAttempt(event.id));
      this.store.markDelivered(event.id, new Date());
      if (Math.random() < this.config.mockProvider.webhookDuplicateRate) {
        await this.untilAcknowledged(url, event);
      }
    } catch (error) {
      if (!this.stopping.signal.aborted) this.logger.error({ msg: 'event delivery stopped', eventId: event.id, error });
    }
  }

  private async untilAcknowledged(url: string, event: ProviderEvent, onAttempt?: () => void): Promise<void> {
    for (let retry = 0; ; retry++) {
      const maxDelayMs = this.config.mockProvider.webhookMaxDelayMs;
      if (maxDelayMs > 0) await this.sleep(randomInt(maxDelayMs + 1));
      const failure = await this.withSlot(() => this.attempt(url, event));
      onAttempt?.();
      if (failure === undefined) return;
      const waitMs = backoffDelayMs(BACKOFF, retry);
      this.logger.warn({
        msg: 'event delivery failed; will retry',
        eventId: event.id,
        failure,
        waitMs: Math.round(waitMs),
      });
      await this.sleep(waitMs);
    }
  }

  /** Undefined when acknowledged, else why not. Throws only when stopping. */
  private attempt(url: string, event: ProviderEvent): Promise<string | undefined> {
    const request = signedDelivery(this.webhook, event, new Date());
    return postSignedWebhook(url, request, { timeoutMs: ATTEMPT_TIMEOUT_MS, stop: this.stopping.signal });
  }

  private async withSlot<T>(work: () => Promise<T>): Promise<T> {
    while (this.inFlight >= MAX_IN_FLIGHT) {
      await new Promise<void>((wake) => this.waitingForSlot.push(wake));
    }
    this.inFlight++;
    try {
      return await work();
    } finally {
      this.inFlight--;
      this.waitingForSlot.shift()?.();
    }
  }

  /** Unreferenced: the HTTP server keeps the provider alive, not a pending retry. */
  private sleep(ms: number): Promise<void> {
    return delay(ms, undefined, { signal: this.stopping.signal, ref: false });
  }
}
