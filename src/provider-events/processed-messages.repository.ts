import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { limitLiteral, queryRow, queryRows } from '../database/sql';

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

  /**
   * Deletes up to `limit` of a client's records processed more than
   * `olderThanMs` ago, by the database's clock (processed_at is its now()),
   * through processed_messages_client_processed_idx, in one statement that
   * skips rows a concurrent prune holds. Forgetting an old message is safe: it
   * moved its payment's provider_version to at least its own version, so
   * should it come again it is refused as stale and changes nothing. The
   * batch size is in the text (limitLiteral), as in the events' prune.
   */
  async pruneOlderThan(db: EntityManager, clientId: string, olderThanMs: number, limit: number): Promise<number> {
    const rows = await queryRows(
      db,
      `WITH batch AS MATERIALIZED (
         SELECT consumer, message_id FROM processed_messages
          WHERE client_id = $1 AND processed_at < now() - $2 * interval '1 millisecond'
          LIMIT ${limitLiteral(limit)}
            FOR UPDATE SKIP LOCKED)
       DELETE FROM processed_messages m
        USING batch
        WHERE m.client_id = $1 AND m.consumer = batch.consumer AND m.message_id = batch.message_id
        RETURNING 1`,
      [clientId, olderThanMs],
    );
    return rows.length;
  }

  /** How many of a client's records pruneOlderThan would delete, counted up to `cap`. */
  async countOlderThan(db: EntityManager, clientId: string, olderThanMs: number, cap: number): Promise<number> {
    const row = await queryRow<{ count: number }>(
      db,
      `SELECT count(*)::int AS count
         FROM (SELECT 1 FROM processed_messages
                WHERE client_id = $1 AND processed_at < now() - $2 * interval '1 millisecond'
                LIMIT $3) old`,
      [clientId, olderThanMs, cap],
    );
    return row?.count ?? 0;
  }
}
