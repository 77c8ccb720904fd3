import type { KeyState } from '../ledger/idempotency.repository';
import type { StoredResponse } from '../ledger/lease';

/**
 * What an idempotency key says about a request, decided from one read of it.
 *
 * - `new`: no key, or one past its retention (which only a key holding its
 *   final answer has): the request claims it as a new one;
 * - `reused`: another request under the key, refused before anything else
 *   (422 even while the original still runs);
 * - `replay`: the key holds a final response: send it again;
 * - `in_progress`: a live lease: someone is working on the row (409);
 * - `resumable`: the row (a payment, a refund) is unfinished and nobody
 *   holds it: take the lease over and resume that same row.
 */
export type KeyVerdict =
  | { kind: 'new' }
  | { kind: 'reused' }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'in_progress' }
  | { kind: 'resumable'; resourceId: string };

export function keyVerdict(state: KeyState | undefined, fingerprint: string): KeyVerdict {
  if (!state || state.expired) return { kind: 'new' };
  if (state.fingerprint !== fingerprint) return { kind: 'reused' };
  if (state.response) return { kind: 'replay', response: state.response };
  if (state.leaseRemainingSeconds > 0) return { kind: 'in_progress' };
  return { kind: 'resumable', resourceId: state.resourceId };
}
