import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import { OperationsRepository } from '../ledger/operations.repository';

const USAGE = 'usage: npm run payments:review -- [--client ID] [--limit N]\n';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `npm run payments:review -- [--client ID] [--limit N]`: what waits for a
 * person, the longest waiting first, one JSON line per payment or refund in
 * review: why it is there, since when, and when the worker asks the provider
 * again (null once those re-checks have ended). Each is settled by the
 * provider's answer or by `npm run payment:resolve` / `refund:resolve`.
 * Read-only; exit 2 on bad arguments.
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
    const rows = new OperationsRepository();
    const page = { clientId: values.client, limit };
    const payments = await rows.listInReview(dataSource.manager, PAYMENTS, page);
    const refunds = await rows.listInReview(dataSource.manager, REFUNDS, page);
    const lines = [
      ...payments.map((payment) => ({
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
      })),
      ...refunds.map((refund) => ({
        object: 'refund',
        id: refund.id,
        client: refund.clientId,
        payment: refund.paymentId,
        amount: refund.amount,
        currency: refund.currency,
        failure_code: refund.failureCode,
        failure_message: refund.failureMessage,
        provider_refund_id: refund.providerRefundId,
        reconcile_attempts: refund.reconcileAttempts,
        created_at: refund.createdAt.toISOString(),
        in_review_since: refund.updatedAt.toISOString(),
        next_recheck_at: refund.nextRecheckAt?.toISOString() ?? null,
      })),
    ];
    // Both lists are oldest first; merged, the oldest of either comes first, `limit` in all.
    lines.sort((a, b) => a.in_review_since.localeCompare(b.in_review_since) || a.id.localeCompare(b.id));
    for (const line of lines.slice(0, limit)) process.stdout.write(`${JSON.stringify(line)}\n`);
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`payments:review failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
