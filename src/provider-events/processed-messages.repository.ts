import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRows } from '../database/sql';

/** The processed_messages table: what makes an at-least-once consumer apply each message at most once. */
@Injectable()
export class ProcessedMessagesRepository {
  /**
   * Records the message as processed by this consumer, under the client of
   * the payment it applies to (so on that payment's shard), in the caller's
   * transaction. False when it already was: a duplicate, whose effect is
   * already committed. A concurrent duplicate waits on the primary key until
   * the first commits (then finds it) or rolls back (then takes its place).
   */
  async record(db: EntityManager, clientId: string, consumer: string, messageId: string): Promise<boolean> {
    const rows = await queryRows(
      db,
      `INSERT INTO processed_messages (client_id, consumer, message_id) VALUES ($1, $2, $3)
       ON CONFLICT (client_id, consumer, message_id) DO NOTHING
       RETURNING 1`,
      [clientId, consumer, messageId],
    );
    return rows.length === 1;
  }
}
