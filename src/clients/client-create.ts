import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { SecretBox } from '../common/secret-box';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { onboardClient } from '../merchant-events/client-onboarding';
import { DomainError } from '../common/domain-error';

const USAGE = 'usage: npm run client:create -- --name NAME [--webhook-url URL]\n';

/**
 * `npm run client:create -- --name NAME [--webhook-url URL]`: prints
 * {"id","name","api_key"} on one line, with "webhook_endpoint", "webhook_url"
 * and "webhook_secret" when the client gets its first webhook endpoint (every
 * event type; more through POST /v1/webhook_endpoints). A URL the worker must
 * not send to (credentials in it, a loopback or private address:
 * webhook-url-policy.ts) is refused with one line and exit 2, before anything
 * is written.
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
  const webhookUrl = values['webhook-url'];
  const policy = { allowPrivate: config.webhooks.allowPrivateUrls };
  const dataSource = await createDataSource(config).initialize();
  try {
    const client = await onboardClient(dataSource, { box: new SecretBox(config.secrets), policy }, values.name, { webhookUrl });
    process.stdout.write(`${JSON.stringify(client)}\n`);
  } catch (error) {
    // onboardClient checks the URL before it writes anything.
    if (!(error instanceof DomainError && error.details.param === 'url')) throw error;
    process.stderr.write(`client:create: --webhook-url refused: ${error.message}\n`);
    process.exitCode = 2;
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`client:create failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
