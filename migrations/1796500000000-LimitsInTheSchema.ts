import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every limit the API states on a payment's fields is a check in the schema
 * too, counted as the API counts it (length(): code points), so validation
 * and schema can never disagree into a 500: order_id already had its check;
 * payment_method, description and metadata gain theirs, and an idempotency
 * key its grammar. The provider's charge id and failure code get the caps the
 * provider client reads them under.
 *
 * Rows that break a limit (written before the API counted in code points)
 * fail this migration, which runs in one transaction and leaves the schema as
 * it was; `SELECT id FROM payments WHERE NOT payment_metadata_is_valid(metadata)
 * OR length(description) > 500 OR length(payment_method) NOT BETWEEN 1 AND 255`
 * (after creating the function) finds them for a person to decide.
 */
export class LimitsInTheSchema1796500000000 implements MigrationInterface {
  name = 'LimitsInTheSchema1796500000000';

  async up(db: QueryRunner): Promise<void> {
    // At most 20 keys of 1 to 40 code points, each a string of at most 500.
    // CASE, not AND: jsonb_each must not see anything but an object.
    await db.query(`
      CREATE FUNCTION payment_metadata_is_valid(metadata jsonb) RETURNS boolean
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
          SELECT CASE WHEN jsonb_typeof(metadata) <> 'object' THEN false ELSE
            (SELECT count(*) <= 20
                    AND bool_and(length(key) BETWEEN 1 AND 40
                                 AND jsonb_typeof(value) = 'string'
                                 AND length(value #>> '{}') <= 500) IS NOT FALSE
               FROM jsonb_each(metadata))
          END
        $$`);
    await db.query(`
      ALTER TABLE payments
        ADD CONSTRAINT payments_payment_method_check CHECK (length(payment_method) BETWEEN 1 AND 255),
        ADD CONSTRAINT payments_description_check CHECK (length(description) <= 500),
        ADD CONSTRAINT payments_metadata_check CHECK (payment_metadata_is_valid(metadata)),
        ADD CONSTRAINT payments_provider_charge_id_check CHECK (length(provider_charge_id) BETWEEN 1 AND 255),
        ADD CONSTRAINT payments_failure_code_check CHECK (length(failure_code) BETWEEN 1 AND 100)`);
    // 1 to 255 printable ASCII characters, not all blank, as the API parses the header.
    await db.query(`
      ALTER TABLE idempotency_keys
        ADD CONSTRAINT idempotency_keys_key_check CHECK (key ~ '^[ -~]{1,255}$' AND btrim(key) <> '')`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_key_check`);
    await db.query(`
      ALTER TABLE payments
        DROP CONSTRAINT payments_payment_method_check,
        DROP CONSTRAINT payments_description_check,
        DROP CONSTRAINT payments_metadata_check,
        DROP CONSTRAINT payments_provider_charge_id_check,
        DROP CONSTRAINT payments_failure_code_check`);
    await db.query(`DROP FUNCTION payment_metadata_is_valid(jsonb)`);
  }
}
