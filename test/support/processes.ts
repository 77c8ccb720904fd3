/**
 * The three processes of the stack as real children, for the e2e tests and for
 * scripts run with plain Node (this file compiles to dist/test/support/, so it
 * uses no jest API). Assumes dist/ is built.
 *
 * Every child gets an IPC channel and leaves when it closes, so none outlives
 * its parent, even one killed with SIGKILL. (A process 'exit' hook would not
 * do: inside jest, `process` is a sandbox copy that never emits 'exit'.)
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { API_NODE_FLAGS } from '../../src/config/api-node-flags';
import type { Charge, ListedChargeEvent, Refund } from '../../src/mock-provider/mock-provider.types';

export type { Charge, ListedChargeEvent };

/** dist/, whether this file runs from source (ts-jest) or compiled into dist/test/support. */
const DIST = __dirname.includes(`${sep}dist${sep}`) ? resolve(__dirname, '../..') : resolve(__dirname, '../../dist');
const DIST_SRC = join(DIST, 'src');
/**
 * V8's code cache for the children (NODE_COMPILE_CACHE): start-up is mostly
 * compiling dist/ and node_modules/, and a test run starts dozens of children.
 */
const COMPILE_CACHE = join(tmpdir(), 'payments-api-compile-cache');
/**
 * How long a child may take to say it is up. A process that dies says so at
 * once; this bounds only a slow start, and a start takes seconds when the
 * machine is busy (over 20 s has been seen on two loaded cores mid chaos run).
 */
const START_DEADLINE_MS = 60_000;
const DEFAULT_WAIT_MS = 10_000;
const KEPT_OUTPUT_LINES = 5_000;
/** How much of a child's output an error message quotes. */
const TAIL_LINES = 40;

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One line a child wrote to stdout or stderr; `json` is set when it is a JSON log entry. */
export interface OutputLine {
  text: string;
  json?: Record<string, unknown>;
}

export interface ManagedProcess {
  /** What it runs, for messages: `api`, `worker` or `provider`. */
  readonly name: string;
  readonly pid: number;
  /**
   * Settles once the process has exited and its output has been read,
   * however it ended. Awaiting it does not keep the parent's event loop
   * alive (a forgotten child must never hold its parent open); stop() and
   * kill() do while they wait.
   */
  readonly exited: Promise<ProcessExit>;
  /** SIGTERM, then SIGKILL after graceMs (default 10 s); resolves once exited. */
  stop(graceMs?: number): Promise<ProcessExit>;
  /** SIGKILL, as a crash would: no clean-up runs. Resolves once exited. */
  kill(): Promise<ProcessExit>;
  /** SIGSTOP: the process freezes mid-whatever, as in a long GC pause or a VM stall. */
  pause(): void;
  /** SIGCONT after pause() or a SIGSTOP crash point. */
  resume(): void;
  /** The last lines written to stdout and stderr, oldest first. */
  output(): string[];
  /**
   * The first kept or future line that `match` accepts. Rejects once the
   * process has exited without writing one, or after timeoutMs (default 10 s).
   */
  waitForLine(match: (line: OutputLine) => boolean, timeoutMs?: number): Promise<OutputLine>;
}

export interface HttpProcess extends ManagedProcess {
  /** e.g. http://127.0.0.1:40123, no trailing slash. */
  readonly url: string;
  readonly port: number;
}

/** The payments API (dist/src/main.js). */
export interface ApiProcess extends HttpProcess {
  /** Where it serves GET /metrics: METRICS_PORT, apart from the public port. */
  readonly metricsUrl: string;
}

/** The reconciliation worker (dist/src/worker.js). */
export type WorkerProcess = ManagedProcess;

/** The mock provider (dist/src/provider-main.js). */
export interface ProviderProcess extends HttpProcess {
  /** Every charge the provider holds (GET /charges). */
  charges(): Promise<Charge[]>;
  /** The charges for one payment: the API sends the payment id as the charge's reference. */
  chargesFor(paymentId: string): Promise<Charge[]>;
  /** Every refund the provider holds (GET /refunds). */
  refunds(): Promise<Refund[]>;
  /** The refunds of one refund of ours: the API sends the refund id as the provider refund's reference. */
  refundsFor(refundId: string): Promise<Refund[]>;
  /** Every event the provider emitted, oldest first, with its delivery state (GET /events). */
  events(): Promise<ListedChargeEvent[]>;
}

type Env = Record<string, string>;

export interface LaunchOptions {
  /**
   * A folder where the child's output is also written whole, one file per
   * process (`api-<pid>.log`), so that what a long run's processes said,
   * those killed and replaced included, can be read after it.
   */
  outputDir?: string;
}

/** Thrown when a child exits, or never gets ready, during start-up; carries what it wrote. */
export class ProcessStartError extends Error {
  constructor(
    message: string,
    readonly exit: ProcessExit | undefined,
    readonly lines: string[],
  ) {
    super(`${message}\n${lines.join('\n')}`);
    this.name = 'ProcessStartError';
  }
}

/**
 * The payments API on a random port (PORT=0 unless env sets one), env on top
 * of this process's environment, with the heap settings it has in production;
 * resolves once it answers GET /health/live.
 */
export async function startApiProcess(env: Env = {}, options: LaunchOptions = {}): Promise<ApiProcess> {
  const child = launch('api', join(DIST_SRC, 'main.js'), { PORT: '0', METRICS_PORT: '0', ...env }, options, API_NODE_FLAGS);
  const api = await listening(child, '/health/live');
  const { json } = await api.waitForLine(({ json }) => json?.msg === 'listening');
  return { ...api, metricsUrl: `http://127.0.0.1:${json!.metrics_port as number}` };
}

/** The reconciliation worker; resolves once its BullMQ worker and job schedulers are set up. */
export async function startWorkerProcess(env: Env = {}, options: LaunchOptions = {}): Promise<WorkerProcess> {
  const child = launch('worker', join(DIST_SRC, 'worker.js'), { WORKER_METRICS_PORT: '0', ...env }, options);
  await child.ready(({ json }) => json?.msg === 'started');
  return child.handle;
}

/** The mock provider on a random port (PROVIDER_PORT=0 unless env sets one), once GET /health answers. */
export async function startProvider(env: Env = {}, options: LaunchOptions = {}): Promise<ProviderProcess> {
  // Events off unless the caller names where they go: no test or script posts to the default URL by accident.
  const http = await listening(
    launch('provider', join(DIST_SRC, 'provider-main.js'), { PROVIDER_PORT: '0', PROVIDER_WEBHOOK_URL: '', ...env }, options),
    '/health',
  );
  const read = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${http.url}${path}`);
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`);
    return (await response.json()) as T;
  };
  const charges = () => read<Charge[]>('/charges');
  return {
    ...http,
    charges,
    chargesFor: async (paymentId) => (await charges()).filter((charge) => charge.reference === paymentId),
    refunds: () => read<Refund[]>('/refunds'),
    refundsFor: async (refundId) => (await read<Refund[]>('/refunds')).filter((refund) => refund.reference === refundId),
    events: () => read<ListedChargeEvent[]>('/events'),
  };
}

/**
 * Another HTTP server of dist/ (a script's, such as the bench's stub
 * provider), started like the API: it writes `{"msg":"listening","port":…}`,
 * then `healthPath` answers 200.
 */
export function startHttpProcess(name: string, distEntry: string, healthPath: string, env: Env = {}): Promise<HttpProcess> {
  return listening(launch(name, join(DIST, distEntry), env), healthPath);
}

interface Launched {
  handle: ManagedProcess;
  /** The first line `match` accepts; if the child exits or stalls first, it is killed and this throws. */
  ready(match: (line: OutputLine) => boolean): Promise<OutputLine>;
}

/** Waits for the `{"msg":"listening","port":…}` line, then for the health route to answer 200. */
async function listening({ handle, ready }: Launched, healthPath: string): Promise<HttpProcess> {
  const line = await ready(({ json }) => json?.msg === 'listening' && typeof json.port === 'number');
  const port = line.json!.port as number;
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_DEADLINE_MS;
  let gone = false;
  void handle.exited.then(() => (gone = true));
  while (!(await isHealthy(`${url}${healthPath}`))) {
    if (gone || Date.now() > deadline) {
      const exit = await handle.kill();
      throw new ProcessStartError(`${handle.name} (pid ${handle.pid}) never answered ${healthPath}`, exit, handle.output());
    }
    await new Promise((wake) => setTimeout(wake, 25));
  }
  return { ...handle, url, port };
}

function launch(name: string, entry: string, env: Env, { outputDir }: LaunchOptions = {}, nodeFlags: readonly string[] = []): Launched {
  const child = spawn(process.execPath, [...nodeFlags, entry], {
    env: { NODE_COMPILE_CACHE: COMPILE_CACHE, ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const streams = [child.stdout as Socket, child.stderr as Socket];
  // Unreferenced, so a child a test forgot to stop never holds the test
  // process open; when that process ends, the closed IPC channel ends the child.
  const hold = (held: boolean) => {
    for (const handle of [child, ...streams]) {
      if (held) handle.ref();
      else handle.unref();
    }
  };
  hold(false);
  child.channel?.unref();
  const describe = () => `${name} (pid ${child.pid})`;

  const lines: OutputLine[] = [];
  const watchers = new Set<(line: OutputLine) => void>();
  let file = outputDir === undefined ? undefined : createWriteStream(join(outputDir, `${name}-${child.pid}.log`));
  // A file that cannot be written (a full disk, a folder gone) stops being
  // written; the process, its lines kept here and its exit carry on.
  file?.on('error', (error) => {
    file = undefined;
    lines.push({ text: `(${name}'s output file: ${error.message})` });
  });
  for (const stream of streams) {
    createInterface({ input: stream }).on('line', (text) => {
      file?.write(`${text}\n`);
      const line = { text, json: parseJsonObject(text) };
      lines.push(line);
      if (lines.length > KEPT_OUTPUT_LINES) lines.shift();
      for (const watch of watchers) watch(line);
    });
  }
  const output = () => lines.map((line) => line.text);

  let exit: ProcessExit | undefined;
  // 'close', not 'exit': it comes once stdout and stderr are drained, so the
  // last lines of a child that crashed are kept (and written) before `exited` settles.
  const exited = new Promise<ProcessExit>((settle) =>
    child.once('close', (code, signal) => {
      exit = { code, signal };
      const ended = exit;
      if (file) file.end(() => settle(ended));
      else settle(ended);
    }),
  );

  const signalAndWait = async (signal: NodeJS.Signals, killAfterMs?: number): Promise<ProcessExit> => {
    if (exit) return exit;
    hold(true);
    child.kill(signal);
    // A stopped process acts on SIGTERM only once continued.
    if (signal === 'SIGTERM') child.kill('SIGCONT');
    const escalation = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    try {
      return await exited;
    } finally {
      clearTimeout(escalation);
    }
  };

  const waitForLine = (match: (line: OutputLine) => boolean, timeoutMs = DEFAULT_WAIT_MS): Promise<OutputLine> => {
    const kept = lines.find(match);
    if (kept) return Promise.resolve(kept);
    return new Promise<OutputLine>((settle, fail) => {
      const failWith = (why: string) => {
        const tail = output().slice(-TAIL_LINES).join('\n');
        fail(new Error(`${describe()}: ${why}; its last lines:\n${tail}`));
      };
      const done = (outcome: () => void) => {
        watchers.delete(watch);
        clearTimeout(timer);
        outcome();
      };
      const watch = (line: OutputLine) => {
        if (match(line)) done(() => settle(line));
      };
      const timer = setTimeout(() => done(() => failWith(`no matching line within ${timeoutMs} ms`)), timeoutMs);
      watchers.add(watch);
      void exited.then((ended) => done(() => failWith(`exited (${JSON.stringify(ended)}) without a matching line`)));
    });
  };

  const signal = (sent: NodeJS.Signals) => {
    if (!exit) child.kill(sent);
  };

  const handle: ManagedProcess = {
    name,
    pid: child.pid!,
    exited,
    stop: (graceMs = 10_000) => signalAndWait('SIGTERM', graceMs),
    kill: () => signalAndWait('SIGKILL'),
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    output,
    waitForLine,
  };
  return {
    handle,
    ready: async (match) => {
      try {
        return await waitForLine(match, START_DEADLINE_MS);
      } catch (error) {
        const ended = await signalAndWait('SIGKILL');
        throw new ProcessStartError(`${describe()} did not start: ${(error as Error).message.split('\n')[0]}`, ended, output());
      }
    },
  };
}

/** `text` parsed, when it is a JSON object (a log line, say); undefined for anything else. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether GET `url` answers 200 within a second. */
export async function isHealthy(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}
