import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { type Job, type JobType, Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { bullConnection } from '../src/common/redis-client';
import { type AppConfig, loadConfigOrExit } from '../src/config/app-config';
import { createDataSource } from '../src/database/data-source';
import type { Charge, ListedProviderEvent, Refund as ProviderRefund } from '../src/mock-provider/mock-provider.types';
import type { OperationStatus } from '../src/ledger/operation';
import type { PaymentStatus } from '../src/ledger/payments.table';
import { JobName, RECONCILIATION_QUEUE, type ReconcileJobData } from '../src/reconciliation/reconciliation.constants';
import { type AuditReport, type LedgerPayment, type LedgerRefund, auditLedger } from './lib/ledger-audit';

/**
 * `npm run audit`: compares the provider's ledger (GET /charges, GET /refunds)
 * with the payments and refunds tables and prints one JSON summary. Exit 0: consistent; 1: at least
 * one violation; 2: the audit could not run (a store unreachable, a bad flag).
 * The rules are in lib/ledger-audit.ts; this file reads, in an order that
 * makes the reads safe on a live system (see readLedger).
 */

interface AuditOptions {
  /** Examples kept per kind of violation. */
  maxExamples: number;
  /** Slack for a late sweep before a stale pending payment counts as forgotten. */
  graceMs: number;
}

const DEFAULT_AUDIT_OPTIONS: AuditOptions = { maxExamples: 5, graceMs: 5_000 };

const PROVIDER_TIMEOUT_MS = 30_000;
/** A reconcile job in any of these states will run; completed and failed ones will not. */
const LIVE_JOB_STATES: JobType[] = ['active', 'waiting', 'delayed', 'prioritized', 'waiting-children'];

interface PaymentRow {
  id: string;
  client_id: string;
  order_id: string | null;
  status: PaymentStatus;
  amount: number;
  currency: string;
  provider_key: string;
  provider_charge_id: string | null;
  created_at_ms: number;
  next_reconcile_at_ms: number;
  has_key: boolean;
  leased_until_ms: number | null;
  amount_reserved: number;
  amount_refunded: number;
}

interface RefundRow {
  id: string;
  client_id: string;
  payment_id: string;
  amount: number;
  status: OperationStatus;
  provider_key: string;
  provider_charge_id: string;
  provider_refund_id: string | null;
  created_at_ms: number;
  next_reconcile_at_ms: number;
  has_key: boolean;
  leased_until_ms: number | null;
}

export async function runAudit(config: AppConfig, options: AuditOptions = DEFAULT_AUDIT_OPTIONS): Promise<AuditReport> {
  const ledger = await readLedger(config);
  return auditLedger({
    ...ledger,
    staleAfterMs: config.reconcile.staleAfterMs,
    sweepIntervalMs: config.reconcile.intervalMs,
    graceMs: options.graceMs,
    maxExamples: options.maxExamples,
  });
}

/**
 * Reads the three stores in the one order that is safe while payments and
 * refunds are being made: charges and provider refunds first (every one seen
 * then has its payment or refund committed already: the row commits before
 * the provider is called), then the live reconcile jobs, then the payments
 * and refunds (in one snapshot), then the charges and provider refunds again
 * (every payment or refund that succeeded before its read had its charge or
 * provider refund made before, so the second read holds it).
 */
async function readLedger(config: AppConfig) {
  const chargesBefore = await fetchCharges(config.provider.url);
  const providerRefundsBefore = await fetchProviderRefunds(config.provider.url);
  // Events before the processed records: an event the provider saw acknowledged
  // then had its record committed before the acknowledgement, so it is read here.
  const acknowledgedEvents = (await fetchFromProvider<ListedProviderEvent[]>(config.provider.url, '/events'))
    .filter((event) => event.delivered)
    .map((event) => ({ id: event.id, providerKey: event.data.provider_key }));
  const queuedReconciliations = await readQueuedReconciliations(config);
  const { now, payments, refunds, processedEvents } = await readRows(config);
  const charges = await fetchCharges(config.provider.url);
  const providerRefunds = await fetchProviderRefunds(config.provider.url);
  return {
    now,
    payments,
    charges,
    chargesReadBeforePayments: new Set(chargesBefore.map((charge) => charge.id)),
    refunds,
    providerRefunds,
    providerRefundsReadBeforeRefunds: new Set(providerRefundsBefore.map((refund) => refund.id)),
    queuedReconciliations,
    acknowledgedEvents,
    processedEvents,
  };
}

function fetchCharges(providerUrl: string): Promise<Charge[]> {
  return fetchFromProvider<Charge[]>(providerUrl, '/charges');
}

function fetchProviderRefunds(providerUrl: string): Promise<ProviderRefund[]> {
  return fetchFromProvider<ProviderRefund[]>(providerUrl, '/refunds');
}

async function fetchFromProvider<T>(providerUrl: string, path: string): Promise<T> {
  const response = await fetch(`${providerUrl}${path}`, { signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
  if (response.status !== 200) throw new Error(`GET ${providerUrl}${path} answered ${response.status}`);
  return (await response.json()) as T;
}

async function readQueuedReconciliations(config: AppConfig): Promise<Set<string>> {
  // Fail rather than wait: an audit that cannot see the queue says so (exit 2).
  const connection = bullConnection(config, { maxRetriesPerRequest: 1, connectTimeout: 5_000 });
  const queue = new Queue(RECONCILIATION_QUEUE, { connection, prefix: config.queuePrefix });
  let connectionError: unknown;
  queue.on('error', (error) => {
    connectionError ??= error;
  });
  try {
    // A reconcile job names its rows in its data: several of one operation (ids), or payments as earlier versions queued them (paymentIds, paymentId).
    const jobs = await queue.getJobs(LIVE_JOB_STATES, 0, -1);
    return new Set(
      jobs
        .filter((job): job is Job<ReconcileJobData> => job?.name === JobName.Reconcile)
        .flatMap(({ data }) => ('ids' in data ? data.ids : 'paymentIds' in data ? data.paymentIds : [data.paymentId])),
    );
  } catch (error) {
    throw connectionError ?? error;
  } finally {
    await queue.close();
    // BullMQ leaves a client it was given open.
    if (connection instanceof Cluster) connection.disconnect();
  }
}

async function readRows(
  config: AppConfig,
): Promise<{ now: number; payments: LedgerPayment[]; refunds: LedgerRefund[]; processedEvents: ReadonlySet<string> }> {
  const dataSource = await createDataSource(config).initialize();
  try {
    // One transaction, so every statement shares one now() (the clock every
    // time is read against) and, repeatable read, one snapshot: a payment's
    // refund sums are judged against the refunds as they were when it was read.
    return await dataSource.transaction('REPEATABLE READ', async (db) => {
      const [{ now_ms: now }] = (await db.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS now_ms`)) as {
        now_ms: number;
      }[];
      const rows = (await db.query(`
        SELECT p.id, p.client_id, p.order_id, p.status, p.amount, p.currency, p.provider_key, p.provider_charge_id,
               extract(epoch FROM p.created_at)::float8 * 1000 AS created_at_ms,
               extract(epoch FROM p.next_reconcile_at)::float8 * 1000 AS next_reconcile_at_ms,
               k.payment_id IS NOT NULL AS has_key,
               extract(epoch FROM k.leased_until)::float8 * 1000 AS leased_until_ms,
               p.amount_reserved, p.amount_refunded
          FROM payments p
          LEFT JOIN idempotency_keys k ON k.client_id = p.client_id AND k.payment_id = p.id`)) as PaymentRow[];
      const refundRows = (await db.query(`
        SELECT r.id, r.client_id, r.payment_id, r.amount, r.status, r.provider_key, r.provider_charge_id, r.provider_refund_id,
               extract(epoch FROM r.created_at)::float8 * 1000 AS created_at_ms,
               extract(epoch FROM r.next_reconcile_at)::float8 * 1000 AS next_reconcile_at_ms,
               k.refund_id IS NOT NULL AS has_key,
               extract(epoch FROM k.leased_until)::float8 * 1000 AS leased_until_ms
          FROM refunds r
          LEFT JOIN idempotency_keys k ON k.client_id = r.client_id AND k.refund_id = r.id`)) as RefundRow[];
      const processed = (await db.query(`SELECT message_id FROM processed_messages WHERE consumer = 'provider-events'`)) as {
        message_id: string;
      }[];
      return {
        now,
        processedEvents: new Set(processed.map((row) => row.message_id)),
        payments: rows.map((row) => ({
          id: row.id,
          clientId: row.client_id,
          orderId: row.order_id,
          status: row.status,
          amount: row.amount,
          currency: row.currency,
          providerKey: row.provider_key,
          providerChargeId: row.provider_charge_id,
          createdAt: row.created_at_ms,
          nextReconcileAt: row.next_reconcile_at_ms,
          hasKey: row.has_key,
          leasedUntil: row.leased_until_ms,
          amountReserved: row.amount_reserved,
          amountRefunded: row.amount_refunded,
        })),
        refunds: refundRows.map((row) => ({
          id: row.id,
          clientId: row.client_id,
          paymentId: row.payment_id,
          amount: row.amount,
          status: row.status,
          providerKey: row.provider_key,
          providerChargeId: row.provider_charge_id,
          providerRefundId: row.provider_refund_id,
          createdAt: row.created_at_ms,
          nextReconcileAt: row.next_reconcile_at_ms,
          hasKey: row.has_key,
          leasedUntil: row.leased_until_ms,
        })),
      };
    });
  } finally {
    await dataSource.destroy();
  }
}

function parseOptions(argv: string[]): AuditOptions {
  const { values } = parseArgs({
    args: argv,
    options: { examples: { type: 'string' }, 'grace-ms': { type: 'string' } },
    strict: true,
  });
  return {
    maxExamples: nonNegativeInt('--examples', values.examples, DEFAULT_AUDIT_OPTIONS.maxExamples),
    graceMs: nonNegativeInt('--grace-ms', values['grace-ms'], DEFAULT_AUDIT_OPTIONS.graceMs),
  };
}

function nonNegativeInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new Error(`${flag} must be a non-negative integer (got ${JSON.stringify(value)})`);
  return Number(value);
}

const USAGE = `Usage: npm run audit [-- --examples N] [--grace-ms MS]

Compares the provider's charges and refunds with the payments and refunds tables (DATABASE_URL,
PROVIDER_URL; the queue on REDIS_URL or REDIS_CLUSTER_NODES) and prints one JSON summary; exit 0 clean, 1 on a violation,
2 when it could not run. Read-only.
  --examples N   examples kept per kind of violation (default ${DEFAULT_AUDIT_OPTIONS.maxExamples})
  --grace-ms MS  how old an undecided payment or refund must be before it counts as forgotten (default ${DEFAULT_AUDIT_OPTIONS.graceMs})
`;

async function main(): Promise<void> {
  if (process.argv.includes('--help')) {
    process.stdout.write(USAGE);
    return;
  }
  const config = loadConfigOrExit();
  const report = await runAudit(config, parseOptions(process.argv.slice(2)));
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exitCode = report.ok ? 0 : 1;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`audit could not run: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  });
}
