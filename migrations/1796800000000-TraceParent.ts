import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The W3C traceparent of the request that created a payment or a refund,
 * written in its claim when traces are on (OTEL_EXPORTER_OTLP_ENDPOINT), null
 * otherwise. A reconcile that finishes the row later, in the worker, starts
 * its span as a child of it, so one payment's story is one trace whoever
 * finishes it (docs/operations.md#traces). Nullable without a default: adding
 * it rewrites no row.
 */
export class TraceParent1796800000000 implements MigrationInterface {
  name = 'TraceParent1796800000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE payments ADD COLUMN trace_parent text`);
    await db.query(`ALTER TABLE refunds ADD COLUMN trace_parent text`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE refunds DROP COLUMN trace_parent`);
    await db.query(`ALTER TABLE payments DROP COLUMN trace_parent`);
  }
}
