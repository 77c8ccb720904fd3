import { useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { ProcessedMessagesRepository } from './processed-messages.repository';

describe('ProcessedMessagesRepository on Postgres', () => {
  const db = useLedgerFixtures();
  const messages = new ProcessedMessagesRepository();
  const HOUR_MS = 3_600_000;

  const manager = () => db.dataSource.manager;
  const age = (messageId: string, hours: number) =>
    db.dataSource.query(`UPDATE processed_messages SET processed_at = now() - $2 * interval '1 hour' WHERE message_id = $1`, [
      messageId,
      hours,
    ]);
  const left = async (): Promise<string[]> =>
    ((await db.dataSource.query(`SELECT message_id FROM processed_messages ORDER BY message_id`)) as { message_id: string }[]).map(
      (row) => row.message_id,
    );

  it('records a message once per client and consumer', async () => {
    expect(await messages.record(manager(), db.clientId, 'provider', 'evt_a')).toBe(true);
    expect(await messages.record(manager(), db.clientId, 'provider', 'evt_a')).toBe(false);
  });

  it("deletes one client's records older than the retention, a batch at a time, and keeps the rest", async () => {
    const other = await db.given.client();
    for (const id of ['evt_old_1', 'evt_old_2', 'evt_old_3', 'evt_new']) await messages.record(manager(), db.clientId, 'provider', id);
    await messages.record(manager(), other, 'provider', 'evt_others_old');
    for (const id of ['evt_old_1', 'evt_old_2', 'evt_old_3', 'evt_others_old']) await age(id, 25);

    expect(await messages.countOlderThan(manager(), db.clientId, 24 * HOUR_MS, 10)).toBe(3);
    expect(await messages.countOlderThan(manager(), db.clientId, 24 * HOUR_MS, 2)).toBe(2);
    expect(await messages.countOlderThan(manager(), db.clientId, 26 * HOUR_MS, 10)).toBe(0);

    expect(await messages.pruneOlderThan(manager(), db.clientId, 24 * HOUR_MS, 2)).toBe(2);
    expect(await messages.pruneOlderThan(manager(), db.clientId, 24 * HOUR_MS, 2)).toBe(1);
    expect(await messages.pruneOlderThan(manager(), db.clientId, 24 * HOUR_MS, 2)).toBe(0);

    expect(await left()).toEqual(['evt_new', 'evt_others_old']);
    // A pruned message that comes again is recorded as new: the payment's version refuses it (see the service).
    expect(await messages.record(manager(), db.clientId, 'provider', 'evt_old_1')).toBe(true);
  });

  it('finds old records through the index by client and age', async () => {
    // With a handful of rows the planner prefers a scan of the table; forbidden that, it shows which index serves.
    await db.dataSource.transaction(async (tx) => {
      await tx.query(`SET LOCAL enable_seqscan = off`);
      const [{ 'QUERY PLAN': plan }] = (await tx.query(
        `EXPLAIN (FORMAT JSON) SELECT consumer, message_id FROM processed_messages
          WHERE client_id = $1 AND processed_at < now() - interval '1 day' LIMIT 100`,
        [db.clientId],
      )) as { 'QUERY PLAN': unknown }[];
      expect(JSON.stringify(plan)).toContain('processed_messages_client_processed_idx');
    });
  });
});
