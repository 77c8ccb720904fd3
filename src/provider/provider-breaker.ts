import { Injectable, Logger } from '@nestjs/common';
import {
  BrokenCircuitError,
  type CircuitBreakerPolicy,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  handleWhenResult,
} from 'cockatiel';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Metrics } from '../metrics/metrics';

type BreakerState = 'closed' | 'open' | 'half_open' | 'isolated';

const STATE_NAMES: Record<CircuitState, BreakerState> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Isolated]: 'isolated',
};

/**
 * While a probe is out, its verdict is at most one attempt timeout away:
 * callers are told to come back this soon rather than queue behind it.
 */
const PROBE_UNDER_WAY_MS = 1_000;

/**
 * One circuit breaker per process around every provider attempt (cockatiel's
 * circuit breaker; our retries stay in retry-policy.ts). After
 * PROVIDER_BREAKER_THRESHOLD consecutive failures that count (transient or
 * throttled, as the caller's `failed` says), the circuit opens and every call
 * is refused without touching the network. PROVIDER_BREAKER_HALF_OPEN_MS
 * later the next call goes through as a probe: its success closes the
 * circuit, its failure opens it again.
 *
 * The budget (retry-budget.ts) stops our retries in an outage; the breaker
 * stops the first attempts too, and lets the API refuse new payments before
 * writing anything.
 */
@Injectable()
export class ProviderBreaker {
  private readonly logger = new Logger(ProviderBreaker.name);
  private readonly policy: CircuitBreakerPolicy;
  private readonly halfOpenAfterMs: number;
  /** cockatiel keeps its own copy private; both are read from Date.now, as it does. */
  private openedAt = 0;

  constructor(@InjectConfig() config: AppConfig, metrics: Metrics) {
    const { threshold, halfOpenAfterMs } = config.provider.breaker;
    this.halfOpenAfterMs = halfOpenAfterMs;
    this.policy = circuitBreaker(
      handleWhenResult((verdict) => (verdict as { failed: boolean }).failed),
      { halfOpenAfter: halfOpenAfterMs, breaker: new ConsecutiveBreaker(threshold) },
    );
    this.policy.onStateChange((state) => {
      const to = STATE_NAMES[state];
      if (state === CircuitState.Open) this.openedAt = Date.now();
      metrics.providerBreakerStateChanges.inc({ to });
      const entry = { msg: `provider circuit ${to}`, circuit: to, threshold, halfOpenAfterMs };
      if (state === CircuitState.Open) this.logger.warn(entry);
      else this.logger.log(entry);
    });
  }

  get state(): BreakerState {
    return STATE_NAMES[this.policy.state];
  }

  /** How long from now the breaker refuses calls: 0 when closed, or when a probe is due. */
  refusingForMs(): number {
    switch (this.policy.state) {
      case CircuitState.Closed:
        return 0;
      case CircuitState.Open:
        return Math.max(0, this.openedAt + this.halfOpenAfterMs - Date.now());
      case CircuitState.HalfOpen:
        return PROBE_UNDER_WAY_MS;
      case CircuitState.Isolated:
        return this.halfOpenAfterMs;
    }
  }

  /**
   * Runs `call` unless the circuit refuses it, and records its result: `failed`
   * says whether the result counts against the provider. 'refused' means the
   * call was not made at all.
   */
  async run<T>(call: () => Promise<T>, failed: (result: T) => boolean): Promise<{ result: T } | 'refused'> {
    try {
      const { result } = await this.policy.execute(async () => {
        const result = await call();
        return { result, failed: failed(result) };
      });
      return { result };
    } catch (error) {
      if (error instanceof BrokenCircuitError) return 'refused';
      throw error;
    }
  }
}
