import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { API_NODE_FLAGS } from './config/api-node-flags';

/**
 * `npm run start:all`: the whole stack on one machine without Docker. Applies
 * migrations, then runs the mock provider, the API and the worker as three
 * processes, as compose does. Ctrl-C or SIGTERM stops all three gracefully
 * and exits 0; if one dies, the others are stopped too, so nothing runs
 * half-deployed.
 *
 * Each child runs in a process group of its own, so a Ctrl-C in the terminal
 * (which signals the whole foreground group) reaches only this process, which
 * sends each child one SIGTERM: a second signal would cut a child's drain
 * short. Each child also has an IPC channel to this process and stops when it
 * closes, so a start:all that is killed outright leaves nothing behind.
 */
function run(name: string, script: string, nodeFlags: readonly string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeFlags, join(__dirname, script)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  child.on('exit', (code, signal) => {
    process.stderr.write(`start:all: ${name} exited (${signal ?? code})\n`);
  });
  return child;
}

function exited(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
}

const USAGE = `Usage: npm run start:all

Applies migrations, then runs the mock provider, the API and the worker, all
configured by the environment and .env (see .env.example). Ctrl-C or SIGTERM
stops all three and exits 0.
`;

async function main(): Promise<void> {
  if (process.argv.length > 2) {
    // Nothing is read from the command line: an argument is a question, never a start.
    process.stdout.write(USAGE);
    process.exit(process.argv.includes('--help') ? 0 : 2);
  }
  const migrationCode = await exited(run('migrations', 'database/migrate.js'));
  if (migrationCode !== 0) process.exit(migrationCode);

  const children = [run('provider', 'provider-main.js'), run('api', 'main.js', API_NODE_FLAGS), run('worker', 'worker.js')];
  let signalled = false;
  const stopAll = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (signalled) return;
      signalled = true;
      stopAll();
    });
  }
  const firstCode = await Promise.race(children.map(exited));
  stopAll();
  await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? exited(child) : 0)));
  // Asked to stop: success. A process that died on its own: failure, whatever its code.
  process.exit(signalled ? 0 : firstCode || 1);
}

void main();
