import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { newUlid } from '../common/ulid';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { EventDelivery } from './mock-provider.delivery';
import { chargeEvent, refundEvent, settlesAt, versionAt } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeRecord, ListedProviderEvent, ProviderEvent, RefundRecord } from './mock-provider.types';

/** What emits events: a charge or a refund, told apart by the object it is. */
type Subject = { object: 'charge'; record: ChargeRecord } | { object: 'refund'; record: RefundRecord };

function eventOf(subject: Subject, version: number, id: string, at: Date): ProviderEvent {
  return subject.object === 'charge'
    ? chargeEvent(subject.record, version, id, at)
    : refundEvent(subject.record, version, id, at);
}

/**
 * Emits one event per change of a charge or a refund: when it is created, and
 * when a pending one settles, by a timer at that moment. The store refuses a
 * version twice, and every emission compares the record's version by the clock
 * with its last event, so a change missed while the provider was down (or
 * between journaling a record and its event) is emitted on start, once.
 */
@Injectable()
export class ProviderEventEmitter implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly store: MockProviderStore,
    private readonly delivery: EventDelivery,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  /** Redelivers what no receiver acknowledged before the last stop, then catches up with the clock. */
  onApplicationBootstrap(): void {
    for (const event of this.store.undeliveredEvents()) this.delivery.deliver(event);
    for (const record of this.store.all()) this.emitDue({ object: 'charge', record });
    for (const record of this.store.allRefunds()) this.emitDue({ object: 'refund', record });
  }

  onModuleDestroy(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /** Synchronous, so the event is journaled right after the charge, before the reply. */
  chargeRecorded(record: ChargeRecord): void {
    this.emitDue({ object: 'charge', record });
  }

  /** Synchronous, so the event is journaled right after the refund, before the reply. */
  refundRecorded(record: RefundRecord): void {
    this.emitDue({ object: 'refund', record });
  }

  listEvents(): ListedProviderEvent[] {
    return this.store.listEvents();
  }

  private emitDue(subject: Subject): void {
    const { object, record } = subject;
    const { pendingSettleMs } = this.config.mockProvider;
    const now = Date.now();
    const due = versionAt(record, now, pendingSettleMs);
    for (let version = this.store.lastVersion(object, record.idempotency_key) + 1; version <= due; version++) {
      const event = eventOf(subject, version, `evt_${newUlid()}`, new Date(now));
      this.store.recordEvent(event);
      this.delivery.deliver(event);
    }
    const settles = settlesAt(record, pendingSettleMs);
    // A timer may fire a little before the clock reaches its time: emitDue then re-arms it.
    if (settles !== undefined && now < settles) this.after(Math.max(settles - now, 1), () => this.emitDue(subject));
  }

  private after(ms: number, work: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      work();
    }, ms);
    // The HTTP server keeps the provider alive, not a record waiting to settle.
    timer.unref();
    this.timers.add(timer);
  }
}
