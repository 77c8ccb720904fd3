import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Charge } from '../../src/mock-provider/mock-provider.types';

export type { Charge };

const ENTRY = resolve(__dirname, '../../dist/src/provider-main.js');
const START_DEADLINE_MS = 15_000;
const KEPT_OUTPUT_LINES = 2_000;

export interface ProviderExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A mock provider running as a real child process (dist/src/provider-main.js). */
export interface ProviderProcess {
  /** e.g. http://127.0.0.1:4010, no trailing slash. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Settles when the process has exited, however it ended. */
  readonly exited: Promise<ProviderExit>;
  /** SIGTERM (in-flight requests are answered), SIGKILL after graceMs; resolves once exited. */
  stop(graceMs?: number): Promise<ProviderExit>;
  /** SIGKILL, as a crash would; resolves once exited. */
  kill(): Promise<ProviderExit>;
  /** Every charge the provider holds (GET /charges). */
  charges(): Promise<Charge[]>;
  /** The last lines the process wrote to stdout and stderr (its JSON logs), oldest first. */
  output(): string[];
}

/**
 * Starts the mock provider on a random port (PROVIDER_PORT=0 unless env gives
 * one) with env on top of this process's environment, and resolves once it
 * answers GET /health. Assumes dist/ is built (npm test builds it first).
 *
 * The child gets an IPC channel and exits when it closes, so it never outlives
 * the test process, even one killed with SIGKILL. (A process 'exit' hook would
 * not do: inside jest, `process` is a sandbox copy that never emits 'exit'.)
 */
export async function startProvider(env: Record<string, string> = {}): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [ENTRY], {
    env: { ...process.env, PROVIDER_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  // Unreferenced: a provider a test forgot to stop must not hold the test process
  // open; when that process ends, the closed IPC channel ends the provider.
  child.unref();
  child.channel?.unref();
  const lines: string[] = [];
  let announcedPort: number | undefined;
  for (const stream of [child.stdout as Socket, child.stderr as Socket]) {
    stream.unref();
    createInterface({ input: stream }).on('line', (line) => {
      lines.push(line);
      if (lines.length > KEPT_OUTPUT_LINES) lines.shift();
      announcedPort ??= listeningPort(line);
    });
  }

  let exit: ProviderExit | undefined;
  const exited = new Promise<ProviderExit>((settle) =>
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      settle(exit);
    }),
  );
  const describe = () => `mock provider (pid ${child.pid})\n${lines.join('\n')}`;

  const deadline = Date.now() + START_DEADLINE_MS;
  let port: number | undefined;
  while (port === undefined) {
    if (exit) throw new Error(`${describe()}\nexited before listening: ${JSON.stringify(exit)}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${describe()}\nnot listening after ${START_DEADLINE_MS} ms`);
    }
    if (announcedPort !== undefined && (await isHealthy(announcedPort))) port = announcedPort;
    else await new Promise((wake) => setTimeout(wake, 25));
  }
  const url = `http://127.0.0.1:${port}`;

  const signalAndWait = async (signal: NodeJS.Signals, killAfterMs?: number) => {
    if (exit) return exit;
    child.kill(signal);
    const escalation =
      killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const result = await exited;
    clearTimeout(escalation);
    return result;
  };

  return {
    url,
    port,
    pid: child.pid!,
    exited,
    stop: (graceMs = 10_000) => signalAndWait('SIGTERM', graceMs),
    kill: () => signalAndWait('SIGKILL'),
    charges: async () => {
      const response = await fetch(`${url}/charges`);
      if (response.status !== 200) throw new Error(`GET /charges answered ${response.status}`);
      return (await response.json()) as Charge[];
    },
    output: () => [...lines],
  };
}

/** The port of the provider's `{"msg":"listening","port":…}` line, if this is that line. */
function listeningPort(line: string): number | undefined {
  try {
    const entry = JSON.parse(line) as { msg?: unknown; port?: unknown };
    return entry.msg === 'listening' && typeof entry.port === 'number' ? entry.port : undefined;
  } catch {
    return undefined;
  }
}

async function isHealthy(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/health`, {
      signal: AbortSignal.timeout(1_000),
    });
    return response.status === 200;
  } catch {
    return false;
  }
}
