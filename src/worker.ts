import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { loadConfigOrExit } from './config/app-config';
import { WorkerModule } from './worker.module';

/** SIGTERM closes the BullMQ worker: it takes no new job and waits for the running ones. */
async function bootstrap(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  app.enableShutdownHooks();
  app.get(Logger).log({ msg: 'reconciliation worker started', queuePrefix: config.queuePrefix });
}

void bootstrap();
