import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { newUlid } from '../common/ulid';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { EventDelivery } from './mock-provider.delivery';
import { chargeEvent, settlesAt, versionAt } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeRecord, ListedChargeEvent } from './mock-provider.types';

/**
 * Emits one event per change of a charge: when it is created, and when a
 * pending charge settles, by a timer at that moment. The store refuses a
 * version twice, and every emission compares the charge's version by the clock
 * with its last event, so a change missed while the provider was down (or
 * between journaling a charge and its event) is emitted on start, once.
 */
@Injectable()
export class ChargeEventEmitter implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly store: MockProviderStore,
    private readonly delivery: EventDelivery,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  /** Redelivers what no receiver acknowledged before the last stop, then catches up with the clock. */
  onApplicationBootstrap(): void {
    for (const event of this.store.undeliveredEvents()) this.delivery.deliver(event);
    for (const record of this.store.all()) this.emitDue(record);
  }

  onModuleDestroy(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /** Synchronous, so the event is journaled right after the charge, before the reply. */
  chargeRecorded(record: ChargeRecord): void {
    this.emitDue(record);
  }

  listEvents(): ListedChargeEvent[] {
    return this.store.listEvents();
  }

  private emitDue(record: ChargeRecord): void {
    const { pendingSettleMs } = this.config.mockProvider;
    const now = Date.now();
    const due = versionAt(record, now, pendingSettleMs);
    for (let version = this.store.lastVersion(record.idempotency_key) + 1; version <= due; version++) {
      const event = chargeEvent(record, version, `evt_${newUlid()}`, new Date(now));
      this.store.recordEvent(event);
      this.delivery.deliver(event);
    }
    const settles = settlesAt(record, pendingSettleMs);
    // A timer may fire a little before the clock reaches its time: emitDue then re-arms it.
    if (settles !== undefined && now < settles) this.after(Math.max(settles - now, 1), () => this.emitDue(record));
  }

  private after(ms: number, work: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      work();
    }, ms);
    // The HTTP server keeps the provider alive, not a charge waiting to settle.
    timer.unref();
    this.timers.add(timer);
  }
}
