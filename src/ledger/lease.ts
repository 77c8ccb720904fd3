import type { HttpReply } from '../common/http-reply';

/** The right to work on one payment: whoever holds the token may finish it. */
export interface Lease {
  clientId: string;
  key: string;
  token: string;
}

/** A response stored on a key, replayed byte for byte (with Idempotent-Replayed: true). */
export type StoredResponse = Pick<HttpReply, 'status' | 'body'>;

/**
 * A lease and what this process knows of its expiry: Postgres cannot see it
 * expire before `heldUntil` (a performance.now() time), because that is the
 * lease's length counted from before the statement that took or renewed it.
 * Monotonic, so a stall of the process (a long GC pause, SIGSTOP) counts.
 */
export interface HeldLease extends Lease {
  heldUntil: number;
}

/** A lease taken or renewed by a statement sent at `askedAt` (performance.now()). */
export function heldSince(lease: Lease, askedAt: number, leaseMs: number): HeldLease {
  return { clientId: lease.clientId, key: lease.key, token: lease.token, heldUntil: askedAt + leaseMs };
}
