import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { App } from 'supertest/types';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { configureHttpApp } from '../../src/common/http-app';
import type { AppConfig } from '../../src/config/app-config';
import { WorkerModule } from '../../src/worker.module';

/**
 * The API and the worker as Nest apps inside the jest process, for specs
 * that drive the API through supertest or reach into its providers.
 * process-stack.ts runs them as real processes instead.
 */

/** The API as main.ts builds it, in this process, for supertest. */
export async function startApi(config: AppConfig): Promise<{ app: INestApplication; http: App; dataSource: DataSource }> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(config)] }).compile();
  const app = moduleRef.createNestApplication({ bodyParser: false, logger: false });
  configureHttpApp(app);
  await app.init();
  return { app, http: app.getHttpServer() as App, dataSource: app.get(DataSource) };
}

/** The worker as worker.ts builds it: real BullMQ on the real Redis. */
export async function startWorker(config: AppConfig): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(WorkerModule.forRoot(config), { logger: false });
}
