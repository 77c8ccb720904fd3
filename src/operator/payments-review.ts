import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { PaymentsRepository } from '../ledger/payments.repository';

const USAGE = 'usage: npm run payments:review -- [--client ID] [--limit N]\n';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `npm run payments:review -- [--client ID] [--limit N]`: what waits for a
 * person, the longest waiting first, one JSON line per payment in review:
 * why it is there, since when, and when the worker asks the provider again
 * (null once those re-checks have ended). Each is settled by the provider's
 * answer or by `npm run payment:resolve`. Read-only; exit 2 on bad arguments.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      client: { type: 'string' },
      limit: { type: 'string', default: '100' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const limit = /^[0-9]{1,4}$/.test(values.limit) ? Number(values.limit) : 0;
  if ((values.client !== undefined && !UUID.test(values.client)) || limit < 1) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    const payments = await new PaymentsRepository().listInReview(dataSource.manager, { clientId: values.client, limit });
    for (const payment of payments) {
      const line = {
        object: 'payment',
        id: payment.id,
        client: payment.clientId,
        amount: payment.amount,
        currency: payment.currency,
        failure_code: payment.failureCode,
        failure_message: payment.failureMessage,
        provider_charge_id: payment.providerChargeId,
        reconcile_attempts: payment.reconcileAttempts,
        created_at: payment.createdAt.toISOString(),
        in_review_since: payment.updatedAt.toISOString(),
        next_recheck_at: payment.nextRecheckAt?.toISOString() ?? null,
      };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    }
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`payments:review failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
