import { LRUCache } from 'lru-cache';

/** What one retry costs; the refund per first attempt is set against it. */
const RETRY_COST = 1;

/**
 * A token bucket that caps retries for the calls it is shared by (the seeds'
 * model, section 06); the provider client gives each API client its own
 * (RetryBudgets below). Each retry spends one token, each first
 * attempt refunds `refund` of one, up to `capacity`; when fewer than one token
 * is left the call fails fast instead of retrying.
 *
 * While the provider is healthy, first attempts keep the bucket full and
 * retries are free to happen. In an outage the retries drain it within
 * `capacity` retries, and from then on the provider sees about (1 + refund)
 * calls per request instead of maxAttempts: the budget stops our own retries
 * from turning an outage into a storm.
 *
 * Plain and synchronous: the event loop makes check-and-spend atomic, and the
 * retry lab runs this very class.
 */
export class RetryBudget {
  private available: number;

  constructor(
    readonly capacity: number,
    readonly refund: number,
  ) {
    if (!(capacity >= RETRY_COST)) throw new RangeError(`capacity must be at least ${RETRY_COST}, got ${capacity}`);
    if (!(refund >= 0 && refund <= RETRY_COST)) {
      throw new RangeError(`refund must be between 0 and ${RETRY_COST}, got ${refund}`);
    }
    this.available = capacity;
  }

  get tokens(): number {
    return this.available;
  }

  refundFirstAttempt(): void {
    this.available = Math.min(this.capacity, this.available + this.refund);
  }

  /** Spends a token and says yes, or says no and spends nothing. */
  trySpendRetry(): boolean {
    if (this.available < RETRY_COST) return false;
    this.available -= RETRY_COST;
    return true;
  }
}

/**
 * One RetryBudget per API client, so one client's retries never spend
 * another's tokens: a client whose payments keep failing empties only its own
 * bucket. Bounded per process: past `maxClients` the budget of the least
 * recently seen client is forgotten, and comes back full.
 */
export class RetryBudgets {
  private readonly budgets: LRUCache<string, RetryBudget>;

  constructor(
    readonly capacity: number,
    readonly refund: number,
    maxClients: number,
  ) {
    this.budgets = new LRUCache({ max: maxClients });
  }

  for(clientId: string): RetryBudget {
    let budget = this.budgets.get(clientId);
    if (!budget) {
      budget = new RetryBudget(this.capacity, this.refund);
      this.budgets.set(clientId, budget);
    }
    return budget;
  }
}
