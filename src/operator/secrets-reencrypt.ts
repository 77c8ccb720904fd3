import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { SecretBox } from '../common/secret-box';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { WebhookEndpointsRepository } from '../merchant-events/webhook-endpoints.repository';

const USAGE = `usage: npm run secrets:reencrypt
Seals every webhook endpoint secret again under SECRETS_KEY; SECRETS_KEY_PREVIOUS opens what the old key sealed.
`;
const PAGE = 500;

/**
 * `npm run secrets:reencrypt`: the change of SECRETS_KEY (docs/security.md).
 * Run with the new key as SECRETS_KEY and the old one as
 * SECRETS_KEY_PREVIOUS, the API and the worker running with the same two:
 * every endpoint secret (current and previous) not sealed under the new key
 * is opened and sealed again, each write conditional on the value read (a
 * rotation meanwhile wins). Idempotent: a second run changes nothing.
 * Answers of endpoint writes kept on idempotency keys carry sealed secrets
 * too; they expire with their keys (IDEMPOTENCY_KEY_TTL_HOURS), so the
 * previous key is kept that long after this run. Prints one JSON line; exit 1
 * when a secret cannot be opened with either key.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { help: { type: 'boolean', default: false } } });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const config = loadConfigOrExit();
  const box = new SecretBox(config.secrets);
  const endpoints = new WebhookEndpointsRepository();
  const dataSource = await createDataSource(config).initialize();
  const counts = { examined: 0, resealed: 0, raced: 0 };
  try {
    let after: { afterClientId?: string; afterId?: string } = {};
    for (;;) {
      const rows = await endpoints.sealedSecrets(dataSource.manager, { ...after, limit: PAGE });
      for (const row of rows) {
        for (const [column, sealed] of [
          ['secret_ciphertext', row.secretCiphertext],
          ['previous_secret_ciphertext', row.previousSecretCiphertext],
        ] as const) {
          if (sealed === null) continue;
          counts.examined++;
          if (box.isCurrent(sealed)) continue;
          const resealed = box.seal(box.open(sealed));
          if (await endpoints.replaceSealed(dataSource.manager, row, column, sealed, resealed)) counts.resealed++;
          else counts.raced++;
        }
      }
      if (rows.length < PAGE) break;
      const last = rows[rows.length - 1];
      after = { afterClientId: last.clientId, afterId: last.id };
    }
    process.stdout.write(`${JSON.stringify({ msg: 'secrets re-encrypted', ...counts })}\n`);
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`secrets:reencrypt failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
