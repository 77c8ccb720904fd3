import { loadConfig } from '../../src/config/app-config';
import { type AttemptFailure, ruleFor } from '../../src/provider/provider-errors';
import { RetryBudget } from '../../src/provider/retry-budget';
import { type RetryClock, retry } from '../../src/provider/retry-policy';
import { mulberry32 } from '../../test/support/random';
import { BACKOFF_VARIANTS, type BackoffVariant, variantDelayMs } from './backoff-variants';

/**
 * The retry lab: the three experiments of the seeds (sections 04 to 06), run
 * on the production code. The storm's full and equal jitter are backoffDelayMs
 * (its other variants, which production never runs, are the lab's own); the
 * outage and the layers run retry() itself, the outage with a RetryBudget of
 * the production defaults. Times are ticks or nothing at all: the clock below
 * never moves and never sleeps.
 */

interface StormFigures {
  calls: number;
  ticks: number;
}

interface OutageFigures {
  first: number;
  backend: number;
  /** backend / first: how many calls the backend sees per request. */
  load: number;
}

export interface LabFigures {
  storm: Record<BackoffVariant, StormFigures>;
  budget: { without: OutageFigures; with: OutageFigures };
  /** Calls reaching the bottom for 1, 2, … layers. */
  layers: number[];
}

export const STORM = { clients: 100, baseTicks: 2, capTicks: 64, runs: 20 } as const;
export const OUTAGE = { requestsPerSecond: 100, seconds: 60, maxRetries: 3 } as const;
export const LAYERS = { attemptsPerLayer: 3, depths: [1, 2, 3, 4, 5] } as const;

/** Every call fails the same transient way, so only attempts, budgets and layers decide the counts. */
const DOWN: AttemptFailure = { rule: ruleFor('HTTP 503'), reason: 'HTTP 503' };

const FROZEN_CLOCK: RetryClock = { now: () => 0, sleep: async () => undefined, random: () => 0 };

/** The outage and the layers count calls, which no wait changes: under a zero cap every backoff is 0. */
const NO_BACKOFF = { variant: 'full', baseMs: 0, capMs: 0 } as const;

/**
 * One storm, as the seed's simulation runs it: every client first calls at
 * tick 1; each tick the resource serves one ready client, chosen at random;
 * every other ready client waits max(1, backoff) ticks and tries again.
 */
function stormRun(variant: BackoffVariant, seed: number): StormFigures {
  const random = mulberry32(seed);
  const backoff = { variant, baseMs: STORM.baseTicks, capMs: STORM.capTicks };
  // Insertion-ordered, like the seed's dict: the order of `ready` is part of the draw.
  const due = new Map<number, number>();
  const failures: number[] = [];
  const previous: number[] = [];
  for (let client = 0; client < STORM.clients; client++) {
    due.set(client, 0);
    failures.push(0);
    previous.push(STORM.baseTicks);
  }
  let calls = 0;
  let tick = 0;
  while (due.size > 0) {
    tick++;
    const ready = [...due].filter(([, at]) => at <= tick).map(([client]) => client);
    if (ready.length === 0) continue;
    calls += ready.length;
    const winner = ready[Math.floor(random() * ready.length)];
    due.delete(winner);
    for (const client of ready) {
      if (client === winner) continue;
      // A client cannot call twice in one tick: 'none' means "retry next tick".
      const sleep = Math.max(1, variantDelayMs(backoff, failures[client], previous[client], random));
      failures[client]++;
      previous[client] = sleep;
      due.set(client, tick + sleep);
    }
  }
  return { calls, ticks: tick };
}

/** The mean of STORM.runs storms, seeded 0, 1, …. */
function storm(variant: BackoffVariant): StormFigures {
  let calls = 0;
  let ticks = 0;
  for (let seed = 0; seed < STORM.runs; seed++) {
    const run = stormRun(variant, seed);
    calls += run.calls;
    ticks += run.ticks;
  }
  return { calls: calls / STORM.runs, ticks: ticks / STORM.runs };
}

/**
 * A total outage: every request's every attempt fails. Each request is one
 * call of retry() with up to OUTAGE.maxRetries retries, sharing one budget
 * across all requests as the API process shares its own.
 */
async function outage(budget: RetryBudget | undefined): Promise<OutageFigures> {
  const policy = {
    maxAttempts: 1 + OUTAGE.maxRetries,
    deadlineMs: 60_000,
    backoff: NO_BACKOFF,
  } as const;
  let first = 0;
  let backend = 0;
  for (let request = 0; request < OUTAGE.requestsPerSecond * OUTAGE.seconds; request++) {
    first++;
    await retry(
      policy,
      async () => {
        backend++;
        return { failure: DOWN };
      },
      { budget },
      FROZEN_CLOCK,
    );
  }
  return { first, backend, load: backend / first };
}

/** One request through `depth` layers that each make up to attemptsPerLayer attempts on the one below. */
async function layered(depth: number): Promise<number> {
  const policy = {
    maxAttempts: LAYERS.attemptsPerLayer,
    deadlineMs: 60_000,
    backoff: NO_BACKOFF,
  } as const;
  let bottom = 0;
  const call = async (layer: number): Promise<{ value: never } | { failure: AttemptFailure }> => {
    if (layer === 0) {
      bottom++;
      return { failure: DOWN };
    }
    const outcome = await retry(policy, () => call(layer - 1), {}, FROZEN_CLOCK);
    return outcome.kind === 'done' ? { value: outcome.value } : { failure: DOWN };
  };
  await call(depth);
  return bottom;
}

export async function runLab(): Promise<LabFigures> {
  const { capacity, refund } = loadConfig({}).provider.retryBudget;
  const stormFigures = Object.fromEntries(BACKOFF_VARIANTS.map((variant) => [variant, storm(variant)]));
  const layers: number[] = [];
  for (const depth of LAYERS.depths) layers.push(await layered(depth));
  return {
    storm: stormFigures as LabFigures['storm'],
    budget: { without: await outage(undefined), with: await outage(new RetryBudget(capacity, refund)) },
    layers,
  };
}
