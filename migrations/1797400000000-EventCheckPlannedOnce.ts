import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The commit-time check that a status change was announced
 * (status_has_event) keeps its lookup's plan for the session again, as
 * PL/pgSQL does for any static query, instead of planning it at every
 * commit.
 *
 * OneIndexPerLookup set `plan_cache_mode = force_custom_plan` on the
 * function, against a generic plan that might take another index. A
 * function-level setting is itself a cost on every call (the setting is
 * saved, set and restored around it), and the plan it forced was made afresh
 * every time: together about a twelfth of the database's time per create
 * (perf on the backends: 7.8 % of their samples under the call).
 * The lookup binds all three columns of the events' unique (client, row,
 * type) index, which the planner estimates at one row, less than any index
 * that binds only the client can promise; the event-check spec of plan-once
 * asserts that the generic plans of both lookups take the unique index.
 */
export class EventCheckPlannedOnce1797400000000 implements MigrationInterface {
  name = 'EventCheckPlannedOnce1797400000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER FUNCTION status_has_event() RESET plan_cache_mode`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER FUNCTION status_has_event() SET plan_cache_mode = force_custom_plan`);
  }
}
