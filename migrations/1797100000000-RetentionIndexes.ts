import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the worker's retention prune reads (docs/operations.md, "Retention"):
 *
 * - processed_messages by client and age, oldest first: the prune deletes a
 *   client's records older than PROCESSED_MESSAGES_RETENTION_DAYS in
 *   batches. The primary key (client_id, consumer, message_id) says nothing
 *   of age, so without this index each batch would read the client's whole
 *   key range to find the few rows that have just aged out; with it, a batch
 *   of 1,000 reads 1,000 index entries (EXPLAIN on 990,000 rows: an index
 *   scan on this index, 14 buffers for the batch's selection).
 * - events need nothing new: their ids are ULIDs, which sort by the time
 *   they were made, so the primary key (client_id, id) already finds a
 *   client's oldest events (an index range scan, 28 buffers per 1,000 on
 *   990,000 events). Whether an old event still has a pending delivery is a
 *   probe of the deliveries' primary key (client_id, event_id, …) per event
 *   (a nested-loop anti join, 18 ms per 1,000 with 60,000 deliveries
 *   pending), or, while few deliveries are pending anywhere, one read of
 *   webhook_deliveries_due_idx, whichever the planner finds cheaper: no index
 *   of its own either.
 *
 * The build locks processed_messages against writes for as long as it takes
 * (a migration runs in one transaction, where CREATE INDEX CONCURRENTLY
 * cannot); a provider event that waits past its statement timeout is
 * answered with an error and delivered again by the provider. The build may
 * take longer than the sessions' statement timeout on a table that has grown
 * without a prune until now, so that timeout is lifted for this transaction.
 */
export class RetentionIndexes1797100000000 implements MigrationInterface {
  name = 'RetentionIndexes1797100000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`SET LOCAL statement_timeout = 0`);
    await db.query(`CREATE INDEX processed_messages_client_processed_idx ON processed_messages (client_id, processed_at)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX processed_messages_client_processed_idx`);
  }
}
