import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { type Real, type RunStats, commandArbitrary, emptyStats, finishSequence } from './commands';
import { Model } from './model';
import { ModelStack } from './stack';

/**
 * The model-based run, shared by test/model.e2e-spec.ts (a few sequences,
 * in npm test) and `npm run model` (as many as asked): starts the stack
 * once, then lets fast-check draw `runs` sequences of commands from `seed`,
 * each on an API client of its own and ended by finishSequence. A failing
 * sequence is shrunk (within `shrinkRuns` more sequences: each one runs
 * against the real processes) and reported with its seed, path and the
 * commands that ran.
 */

export interface ModelRunOptions {
  runs: number;
  seed: number;
  /** fast-check's path, to replay one sequence of the seed (as a failure prints it). */
  path?: string;
  /** The commands' replay hint a failure prints beside the counterexample. */
  replayPath?: string;
  maxCommands: number;
  /** Include the commands that kill and freeze API processes at crash points. */
  crashes: boolean;
  /** Sequences spent shrinking a failure, at most. */
  shrinkRuns: number;
  /** Seconds spent shrinking a failure, at most (no shrinking sequence starts after them). */
  shrinkSeconds: number;
  /** No new sequence starts after this long (shrinking has its own budget). */
  maxSeconds: number;
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  progress?: (line: string) => void;
}

export interface ModelRunSummary extends RunStats {
  ok: boolean;
  seed: number;
  /** Sequences run before the first failure (all of them when none failed). */
  sequencesBeforeFailure: number;
  /** Whether maxSeconds ran out before `runs` sequences had run. */
  interrupted: boolean;
  seconds: number;
  faults: { api_kills: number; api_stalls: number; worker_kills: number; worker_mid_job_crashes: number };
  /** fast-check's report: the seed, the path, the shrunk commands and the violation. */
  failure?: string;
}

export async function runModel(options: ModelRunOptions): Promise<ModelRunSummary> {
  const started = performance.now();
  const progress = options.progress ?? (() => undefined);
  const stack = new ModelStack({
    databaseUrl: options.databaseUrl,
    redisUrl: options.redisUrl,
    queuePrefix: options.queuePrefix,
    progress,
  });
  const stats = emptyStats();
  let failed = false;
  let sequencesBeforeFailure = 0;
  let shrinking = 0;
  let shrinkUntil = Infinity;
  let skipped = 0;
  const runTag = randomBytes(3).toString('hex');
  try {
    await stack.start();
    progress(`stack up in ${Math.round(performance.now() - started)} ms`);
    const property = fc.asyncProperty(
      fc.commands([commandArbitrary({ crashes: options.crashes })], {
        maxCommands: options.maxCommands,
        size: 'max',
        replayPath: options.replayPath,
      }),
      async (commands) => {
        // Past the shrink budget, a candidate passes unrun: fast-check keeps the smallest failure it has.
        if (failed && (shrinking++ >= options.shrinkRuns || performance.now() > shrinkUntil)) return;
        // Past the run's time, the sequences left pass unrun, and the summary says so.
        if (!failed && performance.now() - started > options.maxSeconds * 1000) {
          skipped++;
          return;
        }
        const sequence = stats.sequences++;
        const real: Real = { stack, client: await stack.newClient(`model sequence ${sequence}`), stats };
        const model = new Model(`m${runTag}s${sequence}`, stack.foreignPaymentId);
        const stepsBefore = stats.steps;
        try {
          await fc.asyncModelRun(() => ({ model, real }), commands);
          await finishSequence(model, real);
          if (!failed) sequencesBeforeFailure++;
          progress(
            `${failed ? 'shrinking: ' : ''}sequence ${sequence} passed: ${stats.steps - stepsBefore} steps, ${model.payments.length} payments, ${model.refunds.length} refunds (${Math.round((performance.now() - started) / 1000)} s)`,
          );
        } catch (error) {
          if (!failed) {
            shrinkUntil = performance.now() + options.shrinkSeconds * 1000;
            progress(`sequence ${sequence} FAILED; shrinking within ${options.shrinkRuns} sequences and ${options.shrinkSeconds} s`);
          } else progress(`shrinking: sequence ${sequence} failed too (${stats.steps - stepsBefore} steps)`);
          failed = true;
          throw error;
        } finally {
          await stack.resumeAllStalled();
          await stack.worker.resume();
        }
      },
    );
    const details = await fc.check(property, {
      numRuns: options.runs,
      seed: options.seed,
      path: options.path,
    });
    return {
      ...stats,
      ok: !details.failed,
      seed: options.seed,
      sequencesBeforeFailure,
      interrupted: skipped > 0,
      seconds: Math.round((performance.now() - started) / 1000),
      faults: {
        api_kills: stack.apiKills,
        api_stalls: stack.apiStalls,
        worker_kills: stack.worker.kills,
        worker_mid_job_crashes: stack.worker.crashes,
      },
      ...(details.failed && { failure: `${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}` }),
    };
  } finally {
    await stack.stop();
  }
}
