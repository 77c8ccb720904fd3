import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The metadata check (payment_metadata_is_valid, behind the CHECK of
 * payments and refunds) accepts an empty object without running its query.
 *
 * A CHECK runs on every insert and on every update of a row, whatever the
 * update sets: a payment's outcome, a refund's reservation and its outcome
 * check the payment's metadata again. Counting an object's keys takes a query
 * (jsonb_each), which PL/pgSQL runs through its executor; an empty object,
 * what a payment or refund sent without metadata stores, is valid and needs
 * none: a comparison PL/pgSQL evaluates on its own. What the check accepts
 * and refuses is unchanged (the body is ChecksPlannedOnce's, after the test).
 */
export class EmptyMetadataChecked1797600000000 implements MigrationInterface {
  name = 'EmptyMetadataChecked1797600000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(metadataCheck(`IF metadata = '{}'::jsonb THEN
            RETURN true;
          END IF;`));
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(metadataCheck(''));
  }
}

/** At most 20 keys of 1 to 40 code points, each a string of at most 500; `first` runs before the count. */
function metadataCheck(first: string): string {
  return `
      CREATE OR REPLACE FUNCTION payment_metadata_is_valid(metadata jsonb) RETURNS boolean
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        BEGIN
          ${first}
          -- CASE, not AND: jsonb_each must not see anything but an object.
          RETURN CASE WHEN jsonb_typeof(metadata) <> 'object' THEN false ELSE
            (SELECT count(*) <= 20
                    AND bool_and(length(key) BETWEEN 1 AND 40
                                 AND jsonb_typeof(value) = 'string'
                                 AND length(value #>> '{}') <= 500) IS NOT FALSE
               FROM jsonb_each(metadata))
          END;
        END $$`;
}
