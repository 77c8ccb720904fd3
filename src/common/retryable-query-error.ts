import { QueryFailedError } from 'typeorm';

/**
 * A statement that failed for a reason of the database's own, not the
 * request's, in a transaction the failure aborted: nothing of it was
 * written, and the same request can succeed sent again. The error envelope
 * answers it as it answers a database restart (503, Retry-After), not as a
 * failure it does not know. database/sql.ts raises it for a statement whose
 * server-side function was dropped under the process (see docs/scaling.md).
 */
export class RetryableQueryError extends QueryFailedError {}
