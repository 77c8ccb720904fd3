import './tracing/start-api';
import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import pino from 'pino';
import { AppModule } from './app.module';
import { configureHttpApp } from './http-app';
import { closeConnectionsAfterReplyOnShutdown } from './common/http-shutdown';
import { loadConfigOrExit } from './config/app-config';
import { MetricsServer } from './metrics/metrics.server';

async function bootstrap(): Promise<void> {
  const config = loadConfigOrExit();
  // Spawned with an IPC channel (the process harness does), leave with the
  // parent however it died, so a killed test run leaves no API behind.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const app = await NestFactory.create(AppModule.forRoot(config), { bodyParser: false, bufferLogs: true });
  app.useLogger(app.get(Logger));
  configureHttpApp(app);
  // Nest's shutdown hooks stop accepting connections and let in-flight
  // requests finish; a request stuck past the grace period must not keep the
  // process (and a deploy) waiting for ever.
  process.once('SIGTERM', () => {
    setTimeout(() => process.exit(1), config.http.shutdownGraceMs).unref();
  });
  closeConnectionsAfterReplyOnShutdown(app.getHttpServer() as Server);
  await app.listen(config.http.port);
  const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
  // Written whatever LOG_LEVEL says: whoever started the API with PORT=0 (or
  // METRICS_PORT=0) reads the bound ports from this line.
  const metricsPort = app.get(MetricsServer).port;
  pino({ name: 'payments-api' }).info({ port, url: `http://127.0.0.1:${port}`, metrics_port: metricsPort }, 'listening');
}

bootstrap().catch((error: unknown) => {
  process.stderr.write(`payments API failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
