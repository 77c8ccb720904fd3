import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ScriptRun, runScript } from './run-script';

/** Generous for a busy machine: a short run is bounded by its load, its faults and its drain. */
const RUN_TIMEOUT_MS = 170_000;

/**
 * The short chaos run of the specs: a few hundred payments, about a minute
 * with its drain, two Postgres restarts, in the database named; `extra`
 * adds options (such as --pgbouncer).
 */
export function shortChaosArgs(database: string, extra: string[] = []): string[] {
  return [
    ['--payments', '300'],
    ['--seconds', '30'],
    ['--drain-seconds', '40'],
    ['--events-seconds', '20'],
    ['--database', database],
    ['--failure-rate', '0.3'],
    ['--postgres-restarts', '2'],
    ['--postgres-down-seconds', '3'],
    extra,
  ].flat();
}

/**
 * The compiled `npm run chaos` with these options: its exit code and what it
 * wrote. Its processes' output goes to a new temporary folder, kept only when
 * the run did not exit 0 (stderr names it). Run as from a shell that set no
 * SECRETS_KEY (the suite's own is left out), as `npm run chaos` is run by
 * anyone who tries it.
 */
export async function runChaos(args: string[]): Promise<ScriptRun> {
  const chaos = join(__dirname, '..', '..', 'dist', 'scripts', 'chaos.js');
  const outputDir = mkdtempSync(join(tmpdir(), 'chaos-spec-'));
  const run = await runScript(chaos, [...args, '--output-dir', outputDir], {
    timeoutMs: RUN_TIMEOUT_MS,
    env: { ...process.env, SECRETS_KEY: undefined },
  });
  if (run.code === 0) rmSync(outputDir, { recursive: true, force: true });
  return run;
}

/**
 * Lines of a failed run's stderr a failure shows: its last progress lines,
 * where it stopped, and after a violation what its processes logged of errors.
 */
const STDERR_TAIL_LINES = 30;

/**
 * Fails unless the run exited 0 with its one JSON line, and returns that line
 * parsed. A failure's message leads with the verdict (which count was not
 * zero, and its examples) and ends with the tail of stderr, so a log that
 * keeps only part of a failure still shows why.
 */
export function verdictOf({ code, stdout, stderr }: { code: number | null; stdout: string; stderr: string }): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  if (code !== 0 || lines.length !== 1 || lines[0] === '') {
    const tail = stderr.trimEnd().split('\n').slice(-STDERR_TAIL_LINES).join('\n');
    throw new Error(`chaos run exited ${code}\nverdict: ${stdout.trim() || '(none)'}\nstderr, last lines:\n${tail}`);
  }
  return JSON.parse(lines[0]) as Record<string, unknown>;
}
