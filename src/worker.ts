import './tracing/start-worker';
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import pino from 'pino';
import { loadConfigOrExit, requireSecretsKey } from './config/app-config';
import { WorkerModule } from './worker.module';

/** SIGTERM closes the BullMQ worker: it takes no new job and waits for the running ones. */
async function bootstrap(): Promise<void> {
  const config = loadConfigOrExit();
  requireSecretsKey(config);
  // Spawned with an IPC channel (the process harness does), leave with the
  // parent however it died, so a killed test run leaves no worker behind.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  // Exit 0 once drained rather than re-raise the signal: a deliberate stop is not a crash.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  // A close that never ends must not keep a stopped worker alive: after a
  // Redis Cluster failover, BullMQ's close can wait for ever on a blocking
  // connection left disconnecting. A job cut short is safe: its lock expires
  // and it runs again, and every write it made is under the payment's lease.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      setTimeout(() => {
        pino({ name: 'payments-worker' }).warn({ graceMs: config.http.shutdownGraceMs }, 'shutdown outlasted its grace; exiting');
        process.exit(0);
      }, config.http.shutdownGraceMs).unref();
    });
  }
  // Written whatever LOG_LEVEL says: it is how a supervisor knows the worker is up.
  pino({ name: 'payments-worker' }).info({ queuePrefix: config.queuePrefix }, 'started');
}

bootstrap().catch((error: unknown) => {
  process.stderr.write(`worker failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
