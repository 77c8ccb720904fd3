import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ClientsRepository } from '../clients/clients.repository';
import { ClientByClientPrune, countBacklog } from '../common/client-by-client-prune';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { retentionCutoff } from '../ledger/outbox';
import { EventsRepository } from '../merchant-events/events.repository';
import { Metrics } from '../metrics/metrics';
import { ProcessedMessagesRepository } from '../provider-events/processed-messages.repository';

const DAY_MS = 86_400_000;

/** What one prune run deleted. */
export interface Pruned {
  events: number;
  deliveries: number;
  processedMessages: number;
}

/**
 * Nothing the service writes for every payment grows without bound, but the
 * payments themselves: events older than EVENTS_RETENTION_DAYS go with their
 * deliveries once every delivery is settled (delivered or failed: an event
 * still being delivered is kept, however old), and processed provider
 * messages older than PROCESSED_MESSAGES_RETENTION_DAYS go too. (Expired
 * idempotency keys are the reconciliation worker's prune.) Each run works
 * client by client, in batches of RETENTION_PRUNE_BATCH_SIZE, for at most
 * RETENTION_PRUNE_RUN_BUDGET_MS (see ClientByClientPrune).
 */
@Injectable()
export class RetentionService {
  private readonly logger = new Logger(RetentionService.name);
  private readonly prune: ClientByClientPrune<'events' | 'processedMessages'>;
  /** The deliveries deleted with the events of the run under way. */
  private deliveries = 0;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clients: ClientsRepository,
    private readonly events: EventsRepository,
    private readonly messages: ProcessedMessagesRepository,
    @InjectConfig() private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {
    const { batchSize } = config.retention;
    this.prune = new ClientByClientPrune(
      {
        events: async (clientId) => {
          const pruned = await this.events.pruneMadeBefore(this.dataSource.manager, clientId, this.eventsMadeBefore(), batchSize);
          this.deliveries += pruned.deliveries;
          return pruned.events;
        },
        processedMessages: (clientId) =>
          this.messages.pruneOlderThan(this.dataSource.manager, clientId, this.messagesRetentionMs(), batchSize),
      },
      batchSize,
    );
  }

  /**
   * One run: prunes what is past its retention, then, when it stopped on its
   * budget, counts what it left (retention_backlog); one that emptied every
   * backlog says 0 without counting.
   */
  async pruneExpired(): Promise<Pruned> {
    const db = this.dataSource.manager;
    this.deliveries = 0;
    const run = await this.prune.run(await this.clients.ids(), this.config.retention.runBudgetMs);
    const pruned = { events: run.pruned.events, deliveries: this.deliveries, processedMessages: run.pruned.processedMessages };
    const madeBefore = this.eventsMadeBefore();
    const eventsLeft = await countBacklog(run.unfinished, (clientId, cap) => this.events.countMadeBefore(db, clientId, madeBefore, cap));
    const messagesLeft = await countBacklog(run.unfinished, (clientId, cap) =>
      this.messages.countOlderThan(db, clientId, this.messagesRetentionMs(), cap),
    );
    this.metrics.retentionPruned.inc({ table: 'events' }, pruned.events);
    this.metrics.retentionPruned.inc({ table: 'webhook_deliveries' }, pruned.deliveries);
    this.metrics.retentionPruned.inc({ table: 'processed_messages' }, pruned.processedMessages);
    this.metrics.retentionBacklog.set({ table: 'events' }, eventsLeft);
    this.metrics.retentionBacklog.set({ table: 'processed_messages' }, messagesLeft);
    if (pruned.events + pruned.processedMessages + eventsLeft + messagesLeft > 0) {
      this.logger.log({ msg: 'rows past their retention pruned', ...pruned, backlog: { events: eventsLeft, processedMessages: messagesLeft } });
    }
    return pruned;
  }

  private eventsMadeBefore(): number {
    return retentionCutoff(this.config.retention.eventsDays);
  }

  private messagesRetentionMs(): number {
    return this.config.retention.processedMessagesDays * DAY_MS;
  }
}
