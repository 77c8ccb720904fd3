import { randomUUID } from 'node:crypto';
import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import type { App } from 'supertest/types';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { ClientsRepository } from '../../src/clients/clients.repository';
import { ClientsService } from '../../src/clients/clients.service';
import { configureHttpApp } from '../../src/common/http-app';
import type { AppConfig } from '../../src/config/app-config';
import { RECONCILIATION_QUEUE } from '../../src/reconciliation/reconciliation.constants';
import { WorkerModule } from '../../src/worker.module';

export { eventually } from './eventually';

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

/** A queue prefix of its own per test file, so runs never see each other's jobs. */
export function uniqueQueuePrefix(): string {
  return `test-${randomUUID().slice(0, 8)}`;
}

/** Removes every BullMQ key under the prefix (job schedulers included). */
export async function dropQueue(config: AppConfig): Promise<void> {
  const queue = new Queue(RECONCILIATION_QUEUE, { connection: { url: config.redisUrl }, prefix: config.queuePrefix });
  try {
    await queue.obliterate({ force: true });
  } finally {
    await queue.close();
  }
}

export async function truncateAll(dataSource: DataSource): Promise<void> {
  await dataSource.query('TRUNCATE idempotency_keys, payments, api_clients CASCADE');
}

export async function createClient(dataSource: DataSource, name = 'test client'): Promise<{ id: string; apiKey: string }> {
  const client = await new ClientsService(new ClientsRepository(dataSource)).create(name);
  return { id: client.id, apiKey: client.api_key };
}
