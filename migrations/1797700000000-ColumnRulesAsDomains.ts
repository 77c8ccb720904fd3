import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The rules on one column become the column's type: a domain, checked when a
 * value is assigned to the column, not on every write of the row.
 *
 * A table's CHECK constraints all run on every insert and every update of a
 * row, whatever the statement sets, and Postgres 15 reads each one back from
 * its stored form and prepares it again in every statement that writes the
 * table: a payment's outcome re-checked its amount, currency, method, order
 * id, description and metadata, none of which it can change, and the set-up
 * alone was about a seventh of the database's time per create (perf on the
 * backends: stringToNode and ExecPrepareExpr under ExecConstraints). A
 * domain's rule is kept parsed in each backend's type cache and runs only
 * where a statement assigns the column: the insert, and the updates that set
 * it. The rules are the same; a value they refuse is refused with the same
 * SQLSTATE (23514, check_violation), now naming the domain's constraint.
 *
 * Kept as table checks: rules that relate two columns (a payment's refund
 * sums, a key's lease and response, an event's type and subject), ids and
 * keys written once, and the statuses, whose columns the deferred event
 * checks watch (a column a trigger's WHEN reads cannot change type).
 *
 * Each column first takes a domain without a rule, which changes no stored
 * byte (no rewrite; the indexes are kept, but for the partial one on
 * order_id, rebuilt); the rule is then added NOT VALID and validated: one
 * read of each table. The three tables are held exclusively until the
 * migration commits: 3.8 s for a million payments and their keys on the
 * 2-core development machine (docs/operations.md, "Operator commands").
 */
export class ColumnRulesAsDomains1797700000000 implements MigrationInterface {
  name = 'ColumnRulesAsDomains1797700000000';

  async up(db: QueryRunner): Promise<void> {
    for (const domain of DOMAINS) {
      await db.query(`CREATE DOMAIN ${domain.name} AS ${domain.base}`);
      for (const [table, column] of domain.columns) {
        await db.query(`
          ALTER TABLE ${table}
            ALTER COLUMN ${column} TYPE ${domain.name},
            DROP CONSTRAINT ${table}_${column}_check`);
      }
      await db.query(`ALTER DOMAIN ${domain.name} ADD CONSTRAINT ${domain.name}_check CHECK (${domain.rule('VALUE')}) NOT VALID`);
      await db.query(`ALTER DOMAIN ${domain.name} VALIDATE CONSTRAINT ${domain.name}_check`);
    }
  }

  async down(db: QueryRunner): Promise<void> {
    for (const domain of [...DOMAINS].reverse()) {
      for (const [table, column] of domain.columns) {
        await db.query(`
          ALTER TABLE ${table}
            ALTER COLUMN ${column} TYPE ${domain.base},
            ADD CONSTRAINT ${table}_${column}_check CHECK (${domain.rule(column)})`);
      }
      await db.query(`DROP DOMAIN ${domain.name}`);
    }
  }
}

interface Domain {
  name: string;
  base: string;
  /** The rule on a value, spelled on `value` (VALUE in a domain, the column's name in a table check). */
  rule: (value: string) => string;
  /** [table, column]: each column's table check was named `<table>_<column>_check`. */
  columns: [string, string][];
}

/** The single-column rules of LimitsInTheSchema, Refunds and the migrations before them, unchanged. */
const DOMAINS: Domain[] = [
  {
    name: 'amount_minor_units',
    base: 'integer',
    rule: (value) => `${value} >= 1 AND ${value} <= 99999999`,
    columns: [['payments', 'amount'], ['refunds', 'amount']],
  },
  {
    name: 'currency_code',
    base: 'character(3)',
    rule: (value) => `${value} ~ '^[A-Z]{3}$'`,
    columns: [['payments', 'currency'], ['refunds', 'currency']],
  },
  {
    name: 'payment_method_token',
    base: 'text',
    rule: (value) => `length(${value}) >= 1 AND length(${value}) <= 255`,
    columns: [['payments', 'payment_method']],
  },
  {
    name: 'order_reference',
    base: 'text',
    rule: (value) => `length(${value}) >= 1 AND length(${value}) <= 64`,
    columns: [['payments', 'order_id']],
  },
  {
    name: 'description_text',
    base: 'text',
    rule: (value) => `length(${value}) <= 500`,
    columns: [['payments', 'description']],
  },
  {
    name: 'metadata_object',
    base: 'jsonb',
    rule: (value) => `payment_metadata_is_valid(${value})`,
    columns: [['payments', 'metadata'], ['refunds', 'metadata']],
  },
  {
    name: 'refund_reason',
    base: 'text',
    rule: (value) => `${value} IN ('duplicate', 'fraudulent', 'requested_by_customer')`,
    columns: [['refunds', 'reason']],
  },
  {
    name: 'provider_reference',
    base: 'text',
    rule: (value) => `length(${value}) >= 1 AND length(${value}) <= 255`,
    columns: [['payments', 'provider_charge_id'], ['refunds', 'provider_refund_id']],
  },
  {
    name: 'failure_code',
    base: 'text',
    rule: (value) => `length(${value}) >= 1 AND length(${value}) <= 100`,
    columns: [['payments', 'failure_code'], ['refunds', 'failure_code']],
  },
  {
    name: 'provider_version',
    base: 'integer',
    rule: (value) => `${value} >= 0`,
    columns: [['payments', 'provider_version'], ['refunds', 'provider_version']],
  },
  {
    name: 'idempotency_key',
    base: 'character varying(255)',
    rule: (value) => `${value} ~ '^[ -~]+$' AND btrim(${value}) <> ''`,
    columns: [['idempotency_keys', 'key']],
  },
];
