import { randomUUID } from 'node:crypto';

/**
 * A JSON text that shows a payment, cut where its updated_at goes: the
 * statement that moves the payment writes its own now() between the two
 * parts, as a JSON string in toISOString()'s form (what reading the row back
 * and rendering it gives). So the response a key stores and the event the
 * merchant gets are the very bytes the payment's row renders to, and they are
 * written by the statement that changes the row, with no round trip to learn
 * its time first.
 */
export interface JsonAroundUpdatedAt {
  before: string;
  after: string;
}

/**
 * `render` with updated_at left open: it is given a mark to put where
 * updated_at goes, and must use it once. The mark is new each time (a UUID,
 * which JSON leaves as it is), so no text of the client's can contain it.
 */
export function aroundUpdatedAt(render: (updatedAt: string) => string): JsonAroundUpdatedAt {
  const mark = randomUUID();
  const parts = render(mark).split(JSON.stringify(mark));
  if (parts.length !== 2) throw new Error(`updated_at rendered ${parts.length - 1} times, not once`);
  return { before: parts[0], after: parts[1] };
}

/**
 * A payment's new updated_at (the statement's now()) as a JSON string in
 * Date.toISOString()'s form: UTC, milliseconds truncated, as node-postgres
 * reads a timestamptz into a Date and toResource renders it. Checked
 * against reading the row back by payments.repository.db-spec.
 */
export const UPDATED_AT_JSON = `to_json(to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text`;
