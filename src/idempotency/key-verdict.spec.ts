import type { KeyState } from '../ledger/idempotency.repository';
import { keyVerdict } from './key-verdict';

const FINGERPRINT = 'f'.repeat(64);
const OTHER = 'e'.repeat(64);
const STORED = { status: 201, body: '{"id":"pay_1"}' };

function key(overrides: Partial<KeyState> = {}): KeyState {
  return { fingerprint: FINGERPRINT, resourceId: 'pay_1', leaseRemainingSeconds: 0, expired: false, expiresInMs: null, ...overrides };
}

describe('keyVerdict', () => {
  it('is new when there is no key', () => {
    expect(keyVerdict(undefined, FINGERPRINT)).toEqual({ kind: 'new' });
  });

  it('is new when the key expired (only a key holding its final response does), whatever request it held', () => {
    expect(keyVerdict(key({ expired: true, response: STORED }), OTHER)).toEqual({ kind: 'new' });
    expect(keyVerdict(key({ expired: true, response: STORED }), FINGERPRINT)).toEqual({ kind: 'new' });
  });

  it('refuses another request before anything else: stored response or live lease', () => {
    expect(keyVerdict(key({ response: STORED }), OTHER)).toEqual({ kind: 'reused' });
    expect(keyVerdict(key({ leaseRemainingSeconds: 20 }), OTHER)).toEqual({ kind: 'reused' });
  });

  it('replays a stored response', () => {
    expect(keyVerdict(key({ response: STORED }), FINGERPRINT)).toEqual({ kind: 'replay', response: STORED });
  });

  it('is in progress while a lease is live', () => {
    expect(keyVerdict(key({ leaseRemainingSeconds: 1 }), FINGERPRINT)).toEqual({ kind: 'in_progress' });
  });

  it('is resumable when the row (a payment, a refund) is unfinished and nobody holds the lease', () => {
    expect(keyVerdict(key(), FINGERPRINT)).toEqual({ kind: 'resumable', resourceId: 'pay_1' });
    expect(keyVerdict(key({ resourceId: 're_1' }), FINGERPRINT)).toEqual({ kind: 'resumable', resourceId: 're_1' });
  });
});
