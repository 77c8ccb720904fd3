import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

/**
 * `npm run start:all`: the whole stack on one machine without Docker. Applies
 * migrations, then runs the mock provider, the API and the worker as three
 * processes, as compose does. Ctrl-C or SIGTERM stops all three gracefully;
 * if one dies, the others are stopped too, so nothing runs half-deployed.
 */
const dist = join(__dirname, '..', 'src');

function run(name: string, script: string): ChildProcess {
  const child = spawn(process.execPath, [join(dist, script)], { stdio: 'inherit' });
  child.on('exit', (code, signal) => {
    process.stderr.write(`start:all: ${name} exited (${signal ?? code})\n`);
  });
  return child;
}

function exited(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
}

async function main(): Promise<void> {
  const migrationCode = await exited(run('migrations', 'database/migrate.js'));
  if (migrationCode !== 0) process.exit(migrationCode);

  const children = [run('provider', 'provider-main.js'), run('api', 'main.js'), run('worker', 'worker.js')];
  let signalled = false;
  const stopAll = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
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
