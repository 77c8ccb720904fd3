import type { StoredResponse } from './lease';

/**
 * An idempotent operation: a write a client asks for under an idempotency
 * key, that the provider carries out, and whose outcome may come late. Every
 * operation (a payment, a refund) runs on the same machinery: the key claim,
 * the lease and its fence, the outcome statement with the key's stored answer
 * and the outbox event, the reconciliation ladder and review. What differs
 * between operations is data, and this descriptor says it: which table holds
 * the rows, which column of idempotency_keys and events names one, how a row
 * shows to a client, and what else a move of the row writes.
 */

/** The operations, each the prefix of its events' types (`payment.succeeded`) and of its key column. */
export type OperationName = 'payment' | 'refund';

/** Where a row stands: succeeded and failed are final; the other two are undecided. */
export type OperationStatus = 'pending' | 'succeeded' | 'failed' | 'requires_review';

/** The statuses a row can take after pending, each announced by one event. */
export type AnnouncedStatus = Exclude<OperationStatus, 'pending'>;

/**
 * The columns every operation's table has, under the same names: all that
 * the shared statements read or write (see OperationsRepository).
 */
export interface OperationRow {
  id: string;
  clientId: string;
  status: OperationStatus;
  /** Derived from the id: every call to the provider for this row sends it. */
  providerKey: string;
  failureCode: string | null;
  failureMessage: string | null;
  reconcileAttempts: number;
  /** 'infinity' once a review's re-checks have ended: node-postgres reads that as the number Infinity. */
  nextReconcileAt: Date;
  resolvedBy: string | null;
  resolutionReason: string | null;
  /** The version of the provider's object last applied from a provider event (0: none yet). */
  providerVersion: number;
  /** The W3C traceparent of the request that created the row, when traces were on. */
  traceParent: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * What names one row: its client and id. Every statement on one row names
 * both, so on a schema sharded by client it runs on that client's shard.
 */
export type RowRef = Pick<OperationRow, 'clientId' | 'id'>;

export interface Operation<R extends OperationRow> {
  readonly name: OperationName;
  /** The table, and its SELECT list in the row's shape. */
  readonly table: { readonly name: string; readonly selectList: string };
  /** The column of idempotency_keys and of events that names a row of this operation. */
  readonly keyColumn: `${OperationName}_id`;
  /** The column keeping the provider's id of what it made (a charge, a refund), and its property. */
  readonly providerIdColumn: string;
  readonly providerIdProperty: string;
  /** The row as the API shows it; `updatedAt` stands in for the row's own when given (see aroundUpdatedAt). */
  resource(row: R, updatedAt?: string): object;
  /** The answer a final row gives, stored on its key and replayed byte for byte. */
  finalResponse(row: R, updatedAt?: string): StoredResponse;
  /**
   * What else a move of a row writes, as CTEs of the outcome statement that
   * read the CTE `moved` (the row as it now is, in the row's shape): a
   * refund's effect on its payment's sums. Empty when nothing else changes.
   * `client` is the statement's parameter for the client: every row they
   * touch is named by it, so on a sharded schema the statement stays on the
   * client's shard.
   */
  movedEffects(client: string): string[];
}
