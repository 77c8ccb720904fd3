import type { AddressInfo } from 'node:net';
import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { App } from 'supertest/types';
import { DataSource } from 'typeorm';
import { type ProviderProcess, startProvider } from './processes';
import { reservePort } from './private-redis';
import { emptyTables } from './scratch-database';
import { AppModule } from '../../src/app.module';
import { configureHttpApp } from '../../src/http-app';
import type { AppConfig } from '../../src/config/app-config';
import { MetricsServer } from '../../src/metrics/metrics.server';
import { WorkerModule } from '../../src/worker.module';
import { createClient, dropQueue, testConfig, uniqueQueuePrefix } from './test-env';

/**
 * The API and the worker as Nest apps inside the jest process, with the mock
 * provider as a child: for specs that drive the API through supertest or
 * reach into its providers. process-stack.ts runs them as real processes
 * instead.
 */

type Env = Record<string, string>;

/** The API as main.ts builds it, in this process, for supertest. */
export async function startApi(config: AppConfig): Promise<{ app: INestApplication; http: App; dataSource: DataSource }> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(config)] }).compile();
  const app = moduleRef.createNestApplication({ bodyParser: false, logger: false });
  configureHttpApp(app);
  await app.init();
  return { app, http: app.getHttpServer() as App, dataSource: app.get(DataSource) };
}

export interface InProcessStackOptions {
  /** A provider the caller runs and stops; without one the stack runs its own, started with providerEnv. */
  provider?: ProviderProcess;
  providerEnv?: Env;
  /** The API's config on top of testConfig(); the provider's URL and a queue prefix of the stack's own come first. */
  config?: Env;
  /** The name of the API client made for each test. */
  client?: string;
  /**
   * The provider delivers its charge events to this stack's API (off by
   * default, so that only reconciliation settles what the request did not).
   * Not with a provider the caller runs.
   */
  providerEvents?: boolean;
}

/**
 * Provider, API on a loopback port and a queue prefix of its own; reset()
 * adds emptied tables and one client. The fields are set by start() and
 * reset(), so a spec can hold the stack before its hooks have run.
 */
export class InProcessStack {
  provider!: ProviderProcess;
  config!: AppConfig;
  app!: INestApplication;
  /** e.g. http://127.0.0.1:40123, for supertest and for the HTTP clients in test/support. */
  url!: string;
  /** Where the API serves GET /metrics (its own port, as in production). */
  metricsUrl!: string;
  dataSource!: DataSource;
  apiKey!: string;
  private workers: INestApplicationContext[] = [];
  /** What start() brought up, undone last first; a start that failed half-way is undone as far as it got. */
  private teardown: (() => Promise<unknown>)[] = [];

  constructor(private readonly options: InProcessStackOptions) {}

  async start(): Promise<this> {
    const { provider, providerEnv, config, providerEvents = false } = this.options;
    // The provider starts first (the API needs its URL), so the API's port is chosen before either,
    // and held until the API listens: the API's own start opens connections whose ephemeral ports
    // could otherwise take it (seen once: EADDRINUSE).
    const reserved = await reservePort();
    this.teardown.push(() => reserved.release());
    const apiPort = reserved.port;
    if (provider) {
      this.provider = provider;
    } else {
      const webhookUrl = providerEvents ? `http://127.0.0.1:${apiPort}/v1/provider/events` : '';
      const started = await startProvider({ PROVIDER_WEBHOOK_URL: webhookUrl, ...providerEnv });
      this.provider = started;
      this.teardown.push(() => started.stop());
    }
    this.config = testConfig({ PROVIDER_URL: this.provider.url, QUEUE_PREFIX: uniqueQueuePrefix(), ...config });
    const queueConfig = this.config;
    this.teardown.push(() => dropQueue(queueConfig));
    const { app, dataSource } = await startApi(this.config);
    this.app = app;
    this.teardown.push(() => app.close());
    await reserved.release();
    await app.listen(apiPort, '127.0.0.1');
    this.url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    this.metricsUrl = `http://127.0.0.1:${app.get(MetricsServer).port}`;
    this.dataSource = dataSource;
    return this;
  }

  /** Empties the tables and makes a fresh client, whose key becomes apiKey. */
  async reset(): Promise<void> {
    await emptyTables(this.dataSource);
    this.apiKey = (await createClient(this.dataSource, this.options.client)).apiKey;
  }

  /** The worker as worker.ts builds it, on this stack's provider and queue, with `config` on top of testConfig(). */
  async startWorker(config: Env = {}): Promise<void> {
    const workerConfig = testConfig({ PROVIDER_URL: this.provider.url, QUEUE_PREFIX: this.config.queuePrefix, ...config });
    this.workers.push(await NestFactory.createApplicationContext(WorkerModule.forRoot(workerConfig), { logger: false }));
  }

  async stopWorkers(): Promise<void> {
    await Promise.all(this.workers.splice(0).map((worker) => worker.close()));
  }

  /** Workers, API, the queue's keys in Redis, then the provider if the stack started it. */
  async stop(): Promise<void> {
    await this.stopWorkers();
    for (const undo of this.teardown.splice(0).reverse()) await undo();
  }
}

/** A started and reset stack, for a test that sets its own knobs; the caller stops it. */
export async function startInProcessStack(options: InProcessStackOptions = {}): Promise<InProcessStack> {
  const stack = new InProcessStack(options);
  try {
    await stack.start();
    await stack.reset();
  } catch (error) {
    await stack.stop();
    throw error;
  }
  return stack;
}

/**
 * A stack for the enclosing describe block. `per: 'file'` starts it once and
 * gives each test emptied tables and a fresh client; `per: 'test'` starts a
 * new one, provider included, for every test. Workers a test starts are
 * stopped after it either way.
 */
export function useInProcessStack(options: InProcessStackOptions = {}, per: 'file' | 'test' = 'file'): InProcessStack {
  const stack = new InProcessStack(options);
  if (per === 'test') {
    beforeEach(async () => {
      await stack.start();
      await stack.reset();
    });
    afterEach(() => stack.stop());
  } else {
    beforeAll(() => stack.start());
    beforeEach(() => stack.reset());
    afterEach(() => stack.stopWorkers());
    afterAll(() => stack.stop());
  }
  return stack;
}
