import './tracing/start-provider';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { Logger } from 'nestjs-pino';
import pino from 'pino';
import { closeConnectionsAfterReplyOnShutdown } from './common/http-shutdown';
import { loadConfigOrExit } from './config/app-config';
import { MockProviderModule } from './mock-provider/mock-provider.module';

/** The mock payment provider: its own process, as a real processor would be. */
async function bootstrap(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await NestFactory.create(MockProviderModule.forRoot(config), {
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  // On SIGTERM or SIGINT: stop accepting, answer what is in flight, then exit 0
  // rather than re-raise the signal.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  closeConnectionsAfterReplyOnShutdown(app.getHttpServer());
  // Spawned with an IPC channel (the e2e helper does), leave with the parent
  // however it died, so a killed test run leaves no provider behind.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));

  await app.listen(config.mockProvider.port);
  const { port } = app.getHttpServer().address() as AddressInfo;
  // Written whatever LOG_LEVEL says: whoever started the provider with
  // PROVIDER_PORT=0 reads the bound port from this line.
  pino({ name: 'mock-provider' }).info({ port, url: `http://127.0.0.1:${port}` }, 'listening');
}

bootstrap().catch((error: unknown) => {
  const detail = error instanceof Error ? error.stack : String(error);
  process.stderr.write(`mock provider failed to start: ${detail}\n`);
  process.exit(1);
});
