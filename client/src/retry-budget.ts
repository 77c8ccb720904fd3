/** How a client instance limits its retries: see RetryBudget. */
export interface RetryBudgetOptions {
  /** Retries allowed per first attempt, sustained: 0.1 is one retry per ten calls. */
  ratio: number;
  /** Retries allowed at once after a quiet period: the bucket's size. */
  burst: number;
}

/** What one retry costs. */
const RETRY_COST = 1;

/**
 * A token bucket shared by every call of one client instance. It starts full
 * with `burst` tokens; each call's first attempt adds `ratio` of a token (up
 * to `burst`); each retry takes one, and a retry that finds less than one
 * token is not sent. So over any stretch of time the instance retries at most
 * `ratio` of its first attempts plus `burst`.
 *
 * While the API is healthy first attempts keep the bucket full and retries
 * are free to happen. When the API is down every call fails, the bucket
 * drains within `burst` retries, and from then on the instance sends about
 * 1 + ratio requests per call instead of 1 + maxRetries: a fleet of clients
 * cannot multiply an outage by its retries.
 *
 * Synchronous: the event loop makes check-and-spend atomic.
 */
export class RetryBudget {
  private available: number;

  constructor(readonly options: RetryBudgetOptions) {
    const { ratio, burst } = options;
    if (!(burst >= RETRY_COST) || !Number.isFinite(burst)) {
      throw new RangeError(`retryBudget.burst must be a finite number of at least ${RETRY_COST}, got ${burst}`);
    }
    if (!(ratio >= 0 && ratio <= RETRY_COST)) throw new RangeError(`retryBudget.ratio must be between 0 and 1, got ${ratio}`);
    this.available = burst;
  }

  /** Tokens left: at least one means the next retry may go. */
  get tokens(): number {
    return this.available;
  }

  /** A call's first attempt earns `ratio` of a retry. */
  recordFirstAttempt(): void {
    this.available = Math.min(this.options.burst, this.available + this.options.ratio);
  }

  /** Takes a token and says yes, or says no and takes nothing. */
  trySpendRetry(): boolean {
    if (this.available < RETRY_COST) return false;
    this.available -= RETRY_COST;
    return true;
  }
}
