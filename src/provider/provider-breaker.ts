import { Injectable, Logger } from '@nestjs/common';
import {
  BrokenCircuitError,
  type CircuitBreakerPolicy,
  CircuitState,
  SamplingBreaker,
  circuitBreaker,
  handleWhenResult,
} from 'cockatiel';
import { LRUCache } from 'lru-cache';
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
 * While a probe is out, its verdict is at most one call's deadline away:
 * callers are told to come back this soon rather than queue behind it.
 */
const PROBE_UNDER_WAY_MS = 1_000;

type BreakerSettings = AppConfig['provider']['breaker'];

/** One API client's circuit: cockatiel's policy, and when it last opened (cockatiel keeps its copy private). */
class ClientCircuit {
  readonly policy: CircuitBreakerPolicy;
  private openedAt = 0;
  /** When the client last made a call (Date.now), refused ones not included: whether it votes. */
  lastCallAt = 0;

  constructor(
    private readonly settings: BreakerSettings,
    onStateChange: (circuit: ClientCircuit, state: CircuitState) => void,
  ) {
    const { failureRatio, windowMs, minCalls, halfOpenAfterMs } = settings;
    this.policy = circuitBreaker(
      handleWhenResult((verdict) => (verdict as { failed: boolean }).failed),
      {
        halfOpenAfter: halfOpenAfterMs,
        breaker: new SamplingBreaker({
          threshold: failureRatio,
          duration: windowMs,
          // cockatiel asks for a rate and opens only once the window holds
          // `duration * rate` calls or more; half a call below minCalls turns
          // that into "at least minCalls" whatever the rounding of its slots.
          minimumRps: ((minCalls - 0.5) * 1000) / windowMs,
        }),
      },
    );
    this.policy.onStateChange((state) => {
      // Date.now, as cockatiel reads it.
      if (state === CircuitState.Open) this.openedAt = Date.now();
      onStateChange(this, state);
    });
  }

  get state(): BreakerState {
    return STATE_NAMES[this.policy.state];
  }

  /** How long from now this circuit refuses calls: 0 when closed, or when a probe is due. */
  refusingForMs(): number {
    switch (this.policy.state) {
      case CircuitState.Closed:
        return 0;
      case CircuitState.Open:
        return Math.max(0, this.openedAt + this.settings.halfOpenAfterMs - Date.now());
      case CircuitState.HalfOpen:
        return PROBE_UNDER_WAY_MS;
      case CircuitState.Isolated:
        return this.settings.halfOpenAfterMs;
    }
  }
}

/** The circuits as a log line or a give-up entry reports them. */
export interface CircuitStates {
  client: BreakerState;
  provider: 'open' | 'closed';
}

/**
 * The provider's circuit breaker, scoped by API client (cockatiel's circuit
 * breaker; our retries stay in retry-policy.ts).
 *
 * What counts is one result per provider call, all its retries included: a
 * call that ended without an answer after transient or throttled failures is
 * a failure, anything else (an answer, a 4xx) a success. Each API client has a
 * circuit of its own, a SamplingBreaker: it opens when more than
 * PROVIDER_BREAKER_FAILURE_RATIO of the client's calls in the last
 * PROVIDER_BREAKER_WINDOW_MS failed, once the window holds at least
 * PROVIDER_BREAKER_MIN_CALLS calls. So a client whose payments fail (a card
 * the provider always refuses, a merchant account the provider rejects) opens
 * only its own circuit, however fast it sends them, and its calls are refused
 * until PROVIDER_BREAKER_HALF_OPEN_MS later one of them goes through as a
 * probe: its success closes the circuit, its failure opens it again.
 *
 * The provider itself is down when the failures are spread: the provider-wide
 * circuit is open while at least PROVIDER_BREAKER_MIN_CLIENTS clients' circuits
 * are open (refusing, not yet due for a probe) and they are more than
 * PROVIDER_BREAKER_FAILURE_RATIO of the clients active lately (that made a
 * call in the last window or half-open period, whichever is longer; a client
 * that only asked, or was refused, does not dilute the vote). It then refuses every client's calls, a client with no failure
 * of its own included, and it closes as soon as too few of those circuits
 * still refuse: their probes decide for everyone. It has no probe of its own,
 * so a single client failing on purpose cannot hold it open. A single-tenant
 * deployment needs none of this: its one client's circuit is the provider's.
 *
 * Per process and bounded: the circuits of at most PROVIDER_TRACKED_CLIENTS
 * clients are kept, the least recently seen forgotten first, and a client idle
 * for longer than the window and the half-open period starts afresh. (Short of
 * that, SamplingBreaker moves its window by at most one slot per call: for a
 * client calling less than once a slot, the window spans its last slots with
 * calls rather than the last PROVIDER_BREAKER_WINDOW_MS.)
 *
 * The budget (retry-budget.ts) stops our retries in an outage; the breaker
 * stops the first attempts too, and lets the API refuse new payments before
 * writing anything.
 */
@Injectable()
export class ProviderBreaker {
  private readonly logger = new Logger(ProviderBreaker.name);
  private readonly settings: BreakerSettings;
  private readonly circuits: LRUCache<string, ClientCircuit>;
  /** The circuits in cockatiel's Open state, refusing or due for a probe: the provider-wide vote reads only these. */
  private readonly open = new Set<ClientCircuit>();
  /** The provider-wide verdict as last computed, to log and count its changes once. */
  private providerOpen = false;
  /** How long a client counts as active after its last call, and its circuit is kept when idle. */
  private readonly activeForMs: number;

  constructor(
    @InjectConfig() config: AppConfig,
    private readonly metrics: Metrics,
  ) {
    this.settings = config.provider.breaker;
    // An open circuit is kept at least until its probe is due.
    this.activeForMs = Math.max(this.settings.windowMs, this.settings.halfOpenAfterMs);
    this.circuits = new LRUCache({
      max: config.provider.trackedClients,
      ttl: this.activeForMs,
      updateAgeOnGet: true,
      dispose: (circuit) => this.forget(circuit),
      // cockatiel's clock, so that a circuit and its idle eviction agree on the time.
      perf: { now: () => Date.now() },
    });
  }

  /**
   * How long from now this client's calls are refused, by its own circuit or
   * the provider-wide one: 0 when a call may go.
   */
  refusingForMs(clientId: string): number {
    return Math.max(this.circuitFor(clientId).refusingForMs(), this.providerRefusingForMs());
  }

  /**
   * For a call under way: whether its client's circuit or the provider-wide
   * one has opened since it started, so that it stops retrying. A circuit in
   * half-open is not open: its probe may be this very call.
   */
  opened(clientId: string): boolean {
    const circuit = this.circuitFor(clientId);
    return (circuit.state === 'open' && circuit.refusingForMs() > 0) || this.providerRefusingForMs() > 0;
  }

  states(clientId: string): CircuitStates {
    return { client: this.circuitFor(clientId).state, provider: this.providerRefusingForMs() > 0 ? 'open' : 'closed' };
  }

  /**
   * Runs `call` for this client unless a circuit refuses it, and records its
   * result once: `failed` says whether the result counts against the
   * provider. 'refused' means the call was not made at all.
   */
  async run<T>(
    clientId: string,
    call: () => Promise<T>,
    failed: (result: T) => boolean,
  ): Promise<{ result: T } | 'refused'> {
    if (this.providerRefusingForMs() > 0) return 'refused';
    try {
      const circuit = this.circuitFor(clientId);
      const { result } = await circuit.policy.execute(async () => {
        circuit.lastCallAt = Date.now();
        const result = await call();
        return { result, failed: failed(result) };
      });
      return { result };
    } catch (error) {
      if (error instanceof BrokenCircuitError) return 'refused';
      throw error;
    }
  }

  /** The client's circuit, made on first sight; every look counts as the client being active. */
  private circuitFor(clientId: string): ClientCircuit {
    let circuit = this.circuits.get(clientId);
    if (!circuit) {
      circuit = new ClientCircuit(this.settings, (changed, state) => this.onClientChange(clientId, changed, state));
      this.circuits.set(clientId, circuit);
    }
    return circuit;
  }

  /**
   * How long the provider-wide circuit still refuses: while the open circuits
   * that still refuse are enough clients, and more than the failure ratio of
   * the active ones. Cheap unless several circuits are open at once.
   */
  private providerRefusingForMs(): number {
    const { minClients, failureRatio } = this.settings;
    let waitMs = 0;
    if (this.open.size >= minClients) {
      const refusing = [...this.open].map((circuit) => circuit.refusingForMs()).filter((ms) => ms > 0);
      const needed = Math.max(minClients, Math.floor(failureRatio * this.activeClients()) + 1);
      // The verdict holds until the needed-th longest refusal ends.
      if (refusing.length >= needed) waitMs = refusing.sort((a, b) => b - a)[needed - 1];
    }
    this.noteProviderVerdict(waitMs > 0);
    return waitMs;
  }

  /** Clients that made a call lately: an open circuit that still refuses is always one of them. */
  private activeClients(): number {
    const since = Date.now() - this.activeForMs;
    let active = 0;
    for (const circuit of this.circuits.values()) if (circuit.lastCallAt > since) active++;
    return active;
  }

  private noteProviderVerdict(open: boolean): void {
    if (open === this.providerOpen) return;
    this.providerOpen = open;
    const to = open ? 'open' : 'closed';
    this.metrics.providerBreakerStateChanges.inc({ scope: 'provider', to });
    const entry = {
      msg: `provider circuit ${to} for every client`,
      scope: 'provider',
      circuit: to,
      openClientCircuits: this.open.size,
      activeClients: this.activeClients(),
    };
    if (open) this.logger.warn(entry);
    else this.logger.log(entry);
  }

  private onClientChange(clientId: string, circuit: ClientCircuit, state: CircuitState): void {
    if (state === CircuitState.Open) this.open.add(circuit);
    else this.open.delete(circuit);
    this.metrics.providerBreakerOpenClients.set(this.open.size);
    const to = STATE_NAMES[state];
    this.metrics.providerBreakerStateChanges.inc({ scope: 'client', to });
    // The client id is ours (a uuid), not client data: it says whose payments fail.
    const entry = { msg: `provider circuit ${to} for client ${clientId}`, scope: 'client', clientId, circuit: to };
    if (state === CircuitState.Open) this.logger.warn(entry);
    else this.logger.log(entry);
  }

  private forget(circuit: ClientCircuit): void {
    if (this.open.delete(circuit)) this.metrics.providerBreakerOpenClients.set(this.open.size);
  }
}
