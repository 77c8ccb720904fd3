import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { SecretBox } from '../common/secret-box';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { onboardClient } from '../merchant-events/client-onboarding';

const USAGE = 'usage: npm run client:create -- --name NAME [--webhook-url URL]\n';

/**
 * `npm run client:create -- --name NAME [--webhook-url URL]`: prints
 * {"id","name","api_key"} on one line, with "webhook_endpoint", "webhook_url"
 * and "webhook_secret" when the client gets its first webhook endpoint (every
 * event type; more through POST /v1/webhook_endpoints).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { name: { type: 'string' }, 'webhook-url': { type: 'string' }, help: { type: 'boolean', default: false } },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (!values.name) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const config = loadConfigOrExit();
  const dataSource = await createDataSource(config).initialize();
  try {
    const client = await onboardClient(dataSource, new SecretBox(config.secrets), values.name, { webhookUrl: values['webhook-url'] });
    process.stdout.write(`${JSON.stringify(client)}\n`);
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`client:create failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
