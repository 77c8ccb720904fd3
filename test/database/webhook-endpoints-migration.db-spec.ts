import { WebhookEndpoints1797000000000 } from '../../migrations/1797000000000-WebhookEndpoints';
import { SecretBox } from '../../src/common/secret-box';
import { secretsConfig } from '../../src/config/app-config';
import { useDatabaseBefore } from '../support/before-migration';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

/**
 * WebhookEndpoints on a database whose endpoints kept their secrets in clear:
 * each gets a `we_` id (its deliveries follow), slot 1, and its secret sealed
 * under SECRETS_KEY with no clear copy left; down brings the clear secret and
 * the one-endpoint schema back.
 */
describe('the WebhookEndpoints migration on existing rows', () => {
  const before = useDatabaseBefore(WebhookEndpoints1797000000000, 'endpoints_migration');
  const dataSource = () => before.dataSource;

  it('gives each endpoint a we_ id its deliveries follow and seals its secret; down restores the secret in clear', async () => {
    const [client] = (await dataSource().query(
      `INSERT INTO api_clients (name) VALUES ('m') RETURNING id`,
    )) as { id: string }[];
    const [endpoint] = (await dataSource().query(
      `INSERT INTO webhook_endpoints (client_id, url, secret) VALUES ($1, 'http://127.0.0.1:9/hooks', $2) RETURNING id`,
      [client.id, SECRET],
    )) as { id: string }[];
    await dataSource().transaction(async (db) => {
      await db.query(
        `INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status)
         VALUES ('pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4A', $1, 500, 'USD', 'pm_card_ok', 'pk_1', 'failed')`,
        [client.id],
      );
      await db.query(
        `INSERT INTO events (id, client_id, type, payment_id, data)
         VALUES ('evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4A', $1, 'payment.failed', 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4A', '{}')`,
        [client.id],
      );
    });
    await dataSource().query(`INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id) VALUES ('evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4A', $1, $2)`, [
      endpoint.id,
      client.id,
    ]);

    await dataSource().runMigrations({ transaction: 'all' });

    const [after] = (await dataSource().query(
      `SELECT w.id, w.secret_ciphertext, w.slot, w.enabled_events, w.status, d.endpoint_id AS delivery_endpoint, to_jsonb(w)::text AS whole
         FROM webhook_endpoints w JOIN webhook_deliveries d ON d.client_id = w.client_id AND d.endpoint_id = w.id`,
    )) as { id: string; secret_ciphertext: string; slot: number; enabled_events: string[]; status: string; delivery_endpoint: string; whole: string }[];
    expect(after).toMatchObject({ slot: 1, enabled_events: ['*'], status: 'enabled', delivery_endpoint: after.id });
    expect(after.id).toMatch(/^we_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(after.whole).not.toContain(SECRET.slice(6));
    expect(new SecretBox(secretsConfig()).open(after.secret_ciphertext)).toBe(SECRET);

    await before.undoThrough();

    const [restored] = (await dataSource().query(
      `SELECT w.secret, d.endpoint_id = w.id AS followed FROM webhook_endpoints w JOIN webhook_deliveries d ON d.client_id = w.client_id`,
    )) as { secret: string; followed: boolean }[];
    expect(restored).toEqual({ secret: SECRET, followed: true });
  });
});
