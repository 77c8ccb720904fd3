import type { DataSource } from 'typeorm';
import { ShardByClient1796400000000 } from '../../migrations/1796400000000-ShardByClient';
import { useDatabaseBefore } from '../support/before-migration';

/**
 * ShardByClient on a database that already holds payments: the rows stay, the
 * keys take client_id, and a row whose client disagrees with its payment's
 * stops the migration with nothing changed. In a database of its own, since
 * it takes the schema back to before ShardByClient.
 */
describe('the ShardByClient migration on existing rows', () => {
  const db = useDatabaseBefore(ShardByClient1796400000000, 'shard_migration');
  let dataSource: DataSource;

  beforeEach(() => {
    dataSource = db.dataSource;
  });

  const keyOf = async (constraint: string): Promise<string | undefined> => {
    const rows = (await dataSource.query(`SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = $1`, [
      constraint,
    ])) as { definition: string }[];
    return rows[0]?.definition;
  };
  const counts = async () =>
    (
      (await dataSource.query(
        `SELECT (SELECT count(*) FROM payments)::int AS payments, (SELECT count(*) FROM idempotency_keys)::int AS keys,
                (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM webhook_deliveries)::int AS deliveries,
                (SELECT count(*) FROM processed_messages)::int AS messages`,
      )) as Record<string, number>[]
    )[0];

  /** A succeeded payment as the schema before ShardByClient holds it: key, event, delivery and a processed provider event. */
  async function paymentBefore(clientId: string, id: string, eventClientId = clientId): Promise<void> {
    await dataSource.query(
      `INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status)
       VALUES ($1, $2, 500, 'USD', 'pm_card_ok', 'pk_' || $1, 'pending')`,
      [id, clientId],
    );
    await dataSource.query(
      `INSERT INTO idempotency_keys (client_id, key, fingerprint, payment_id, response_status, response_body, completed_at, expires_at)
       VALUES ($1, $2, repeat('f', 64), $3, 201, '{}', now(), now() + interval '1 day')`,
      [clientId, `key-${id}`, id],
    );
    const eventId = `evt_${id.slice(4)}`;
    await dataSource.transaction(async (db) => {
      await db.query(`UPDATE payments SET status = 'succeeded' WHERE id = $1`, [id]);
      await db.query(`INSERT INTO events (id, client_id, type, payment_id, data) VALUES ($1, $2, 'payment.succeeded', $3, '{}')`, [
        eventId,
        eventClientId,
        id,
      ]);
    });
    await dataSource.query(
      `INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id)
       SELECT $1, id, client_id FROM webhook_endpoints WHERE client_id = $2`,
      [eventId, eventClientId],
    );
    await dataSource.query(`INSERT INTO processed_messages (consumer, message_id) VALUES ('provider-events', $1)`, [`pe_${id}`]);
  }

  /** A client with a webhook endpoint, as the schema before ShardByClient holds it (its key on its row). */
  async function clientBefore(name: string): Promise<{ id: string }> {
    const [client] = (await dataSource.query(
      `INSERT INTO api_clients (name, api_key_hash) VALUES ($1, encode(sha256(convert_to($1, 'UTF8')), 'hex')) RETURNING id`,
      [name],
    )) as { id: string }[];
    await dataSource.query(`INSERT INTO webhook_endpoints (client_id, url, secret) VALUES ($1, 'http://127.0.0.1:9/hooks', 'whsec_x')`, [
      client.id,
    ]);
    return client;
  }

  it('keeps every payment, key, event and delivery, and puts client_id in every key; down and up again keep them too', async () => {
    const clients = [await clientBefore('a'), await clientBefore('b')];
    await paymentBefore(clients[0].id, 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4A');
    await paymentBefore(clients[1].id, 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B');
    expect(await keyOf('payments_pkey')).toBe('PRIMARY KEY (id)');

    await dataSource.runMigrations({ transaction: 'all' });

    // processed_messages is emptied: provider_version refuses those messages again (see the migration).
    expect(await counts()).toEqual({ payments: 2, keys: 2, events: 2, deliveries: 2, messages: 0 });
    expect(await keyOf('payments_pkey')).toBe('PRIMARY KEY (id, client_id)');
    expect(await keyOf('idempotency_keys_payment_id_fkey')).toBe(
      'FOREIGN KEY (client_id, payment_id) REFERENCES payments(client_id, id) DEFERRABLE INITIALLY DEFERRED',
    );
    expect(await keyOf('webhook_deliveries_pkey')).toBe('PRIMARY KEY (client_id, event_id, endpoint_id)');
    expect(await keyOf('processed_messages_pkey')).toBe('PRIMARY KEY (client_id, consumer, message_id)');

    await db.undoThrough();

    expect(await counts()).toEqual({ payments: 2, keys: 2, events: 2, deliveries: 2, messages: 0 });
    expect(await keyOf('payments_pkey')).toBe('PRIMARY KEY (id)');
  });

  it('stops, changing nothing, at an event whose client is not its payment’s', async () => {
    const a = await clientBefore('a');
    const b = await clientBefore('b');
    await paymentBefore(a.id, 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4C', b.id);

    await expect(dataSource.runMigrations({ transaction: 'all' })).rejects.toThrow(/events_payment_id_fkey/);

    expect(await keyOf('payments_pkey')).toBe('PRIMARY KEY (id)');
    expect(await counts()).toEqual({ payments: 1, keys: 1, events: 1, deliveries: 1, messages: 1 });
    // Put right, so that afterEach brings the schema up to date again.
    await dataSource.query(`DELETE FROM webhook_deliveries`);
    await dataSource.query(`DELETE FROM events`);
  });
});
