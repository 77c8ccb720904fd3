import { LRUCache } from 'lru-cache';

/** However many addresses try keys, the limiter's memory stays bounded: the least recently seen are forgotten. */
const MAX_ADDRESSES = 100_000;

/**
 * Failed authentications per network address, in this process's memory.
 * Past `limit` failures within `windowMs` of an address's first one, the
 * address is refused with 429 before its key is even looked up, until the
 * window ends: guessing keys (or just sending junk ones) costs the attacker
 * a request per failure and costs us at most `limit` database lookups per
 * window, instead of one lookup per request for ever.
 */
export class AuthFailureLimiter {
  private readonly failures: LRUCache<string, number>;
  /** The latest end of a refusal so far (Date's clock); 0 before any. */
  private refusingSomeUntil = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
  ) {
    // noUpdateTTL: a failure does not extend the window, so an address is
    // refused for at most windowMs after its first failure.
    // Date's clock rather than the default performance.now(), so tests can move it.
    this.failures = new LRUCache({ max: MAX_ADDRESSES, ttl: windowMs, noUpdateTTL: true, perf: Date });
  }

  /** Whole seconds until `address` may try a key again; 0 when it may now. */
  refusingForSeconds(address: string): number {
    if ((this.failures.get(address) ?? 0) < this.limit) return 0;
    return Math.max(1, Math.ceil(this.failures.getRemainingTTL(address) / 1_000));
  }

  recordFailure(address: string): void {
    const failures = (this.failures.get(address) ?? 0) + 1;
    this.failures.set(address, failures);
    if (failures >= this.limit) {
      this.refusingSomeUntil = Math.max(this.refusingSomeUntil, Date.now() + this.failures.getRemainingTTL(address));
    }
  }

  /**
   * Whether some address may be refused now: false means refusingForSeconds
   * is 0 for every address, so a caller that cannot tell the request's
   * address cheaply (EarlyAnswers, before Express) need not ask.
   */
  mayRefuseSome(): boolean {
    return Date.now() < this.refusingSomeUntil;
  }
}
