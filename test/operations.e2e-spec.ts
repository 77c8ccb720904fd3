import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import type { App } from 'supertest/types';
import { freePort } from './support/private-redis';
import { startApiProcess, startWorkerProcess } from './support/processes';
import { emptyTables } from './support/scratch-database';
import { eventually } from './support/eventually';
import { MetricsServer } from '../src/metrics/metrics.server';
import { startApi } from './support/in-process-app';
import { TEST_DATABASE_URL, createClient, dropQueue, testConfig, uniqueQueuePrefix } from './support/test-env';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(30_000);

describe('operations endpoints', () => {
  let app: INestApplication;
  let http: App;

  beforeAll(async () => {
    ({ app, http } = await startApi(testConfig()));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('answers liveness and readiness with Postgres and Redis up', async () => {
    expect((await request(http).get('/health/live')).status).toBe(200);
    // A process just started may still be opening its connections (each check
    // gives up after a second): ready is what it answers once they are open.
    const ready = await eventually(
      async () => {
        const res = await request(http).get('/health/ready');
        return res.status === 200 ? res : undefined;
      },
      { what: 'readiness' },
    );
    expect(ready.body.checks).toEqual({ postgres: 'up', redis: 'up' });
  });

  it("makes its own X-Request-Id, whatever the client sends", async () => {
    const given = await request(http).get('/health/live').set('X-Request-Id', 'abc-123');
    const none = await request(http).get('/health/live');

    expect(given.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
    expect(none.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/);
    expect(given.headers['x-request-id']).not.toBe(none.headers['x-request-id']);
  });

  it('serves Prometheus metrics on METRICS_PORT, and not on the public port', async () => {
    await request(http).get('/health/live');
    const res = await fetch(`http://127.0.0.1:${app.get(MetricsServer).port}/metrics`);

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toContain(
      'http_request_duration_seconds_count{method="GET",route="/health/live",status="200"}',
    );
    const onPublicPort = await request(http).get('/metrics');
    expect(onPublicPort.status).toBe(404);
    expect(onPublicPort.body.error.code).toBe('route_not_found');
  });

  it('serves the OpenAPI document and its UI', async () => {
    const json = await request(http).get('/docs-json');
    expect(json.status).toBe(200);
    expect(Object.keys(json.body.paths)).toEqual(expect.arrayContaining(['/v1/payments', '/v1/payments/{id}']));
    expect((await request(http).get('/docs')).status).toBe(200);
  });
});

describe('readiness without Redis', () => {
  it('says not ready, in the error envelope', async () => {
    const { app, http } = await startApi(testConfig({ REDIS_URL: 'redis://127.0.0.1:1' }));
    try {
      const res = await request(http).get('/health/ready');
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'service_unavailable', message: expect.stringContaining('redis') });
    } finally {
      await app.close();
    }
  });
});

describe('start-up with a bad knob', () => {
  it.each(['main.js', 'worker.js', 'provider-main.js'])('%s exits with one line naming the variable', (entry) => {
    const result = spawnSync(process.execPath, [join(__dirname, '..', 'dist', 'src', entry)], {
      env: { ...process.env, PROVIDER_TIMEOUT_MS: 'soon' },
      encoding: 'utf8',
      timeout: 20_000,
    });

    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      'Invalid configuration: PROVIDER_TIMEOUT_MS must be an integer (got "soon")',
    ]);
  });
});

describe('rate limiting', () => {
  it('answers 429 rate_limited with Retry-After past the per-client limit, before the key is read', async () => {
    const { app, http, dataSource } = await startApi(testConfig({ RATE_LIMIT_REQUESTS: '2' }));
    try {
      await emptyTables(dataSource);
      const { apiKey } = await createClient(dataSource);
      const other = await createClient(dataSource, 'other');
      const auth = { Authorization: `Bearer ${apiKey}` };
      expect((await request(http).get('/v1/payments').set(auth)).status).toBe(200);
      expect((await request(http).get('/v1/payments').set(auth)).status).toBe(200);

      const limited = await request(http)
        .post('/v1/payments')
        .set(auth)
        .set('Idempotency-Key', 'rate-limited')
        .send({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok' });

      expect(limited.status).toBe(429);
      expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(await dataSource.query('SELECT * FROM idempotency_keys')).toEqual([]);
      // The limit is per client: another client is not held back.
      expect((await request(http).get('/v1/payments').set('Authorization', `Bearer ${other.apiKey}`)).status).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe('the worker’s metrics', () => {
  it('are served on WORKER_METRICS_PORT, key pruning and its backlog included, and nothing else is', async () => {
    const port = await freePort();
    const config = testConfig({ QUEUE_PREFIX: uniqueQueuePrefix() });
    const worker = await startWorkerProcess({
      NODE_ENV: 'test',
      DATABASE_URL: TEST_DATABASE_URL,
      QUEUE_PREFIX: config.queuePrefix,
      WORKER_METRICS_PORT: String(port),
    });
    try {
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      const text = await metrics.text();

      expect(metrics.status).toBe(200);
      expect(text).toContain('idempotency_keys_expired_backlog');
      expect(text).toContain('idempotency_keys_pruned_total');
      expect((await fetch(`http://127.0.0.1:${port}/health/live`)).status).toBe(404);
    } finally {
      await worker.stop();
      await dropQueue(config);
    }
  });
});

describe('the API’s logs', () => {
  it('hold no key-shaped string and no credential header, wherever a client put them', async () => {
    const key = `sk_${'Q'.repeat(43)}`;
    const api = await startApiProcess({ NODE_ENV: 'test', LOG_LEVEL: 'info', DATABASE_URL: TEST_DATABASE_URL });
    try {
      await fetch(`${api.url}/v1/payments?api_key=${key}`, { headers: { Authorization: `Bearer ${key}` } });
      await fetch(`${api.url}/v1/payments`, { headers: { 'X-Api-Key': key, 'User-Agent': `probe ${key}` } });
      const logged = await api.waitForLine(({ json }) => json?.req !== undefined && json.res !== undefined && /X-Api-Key|x-api-key/i.test(JSON.stringify(json.req)));

      expect(logged.text).toContain('[redacted]');
      expect(api.output().join('\n')).not.toContain(key);
    } finally {
      await api.stop();
    }
  });
});

