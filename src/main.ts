import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { configureHttpApp } from './common/http-app';
import { loadConfigOrExit } from './config/app-config';

async function bootstrap(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await NestFactory.create(AppModule.forRoot(config), { bodyParser: false, bufferLogs: true });
  app.useLogger(app.get(Logger));
  configureHttpApp(app);
  // Nest's shutdown hooks stop accepting connections and let in-flight
  // requests finish; a request stuck past the grace period must not keep the
  // process (and a deploy) waiting for ever.
  process.once('SIGTERM', () => {
    setTimeout(() => process.exit(1), config.http.shutdownGraceMs).unref();
  });
  await app.listen(config.http.port);
  app.get(Logger).log({ msg: 'payments API listening', port: config.http.port });
}

void bootstrap();
