import { ConfigError, loadConfig, requireSecretsKey } from './app-config';

const A_KEY = Buffer.alloc(32, 7).toString('base64');

describe('loadConfig', () => {
  it('gives every knob its documented default', () => {
    const config = loadConfig({});

    expect(config.databaseUrl).toBe('postgres://postgres@localhost:5432/payments');
    expect(config.redisUrl).toBe('redis://localhost:6379');
    expect(config.provider.url).toBe('http://localhost:4010');
    expect(config.http.port).toBe(3000);
    expect(config.mockProvider.port).toBe(4010);
    expect(config.idempotency).toEqual({ keyTtlHours: 24, leaseMs: 30_000, answerCacheEntries: 10_000 });
    expect(config.authCache).toEqual({ ttlMs: 1_000, maxKeys: 10_000 });
    expect(config.apiKeyUsageFlushMs).toBe(60_000);
    expect(config.webhooks).toEqual({
      dispatchIntervalMs: 1_000,
      timeoutMs: 10_000,
      backoffBaseMs: 5_000,
      backoffCapMs: 3_600_000,
      retryHorizonHours: 72,
      concurrency: 16,
      maxInFlightPerEndpoint: 4,
      batchSize: 200,
      allowPrivateUrls: false,
    });
    expect(config.retention).toEqual({
      eventsDays: 30,
      processedMessagesDays: 30,
      intervalMs: 60_000,
      batchSize: 1_000,
      runBudgetMs: 30_000,
    });
    expect(config.reconcile).toMatchObject({ staleAfterMs: 60_000, batchSize: 500, concurrency: 8, paymentsPerS: 250 });
    expect(config.provider.retryBudget).toEqual({ capacity: 10, refund: 0.1 });
    expect(config.provider.breaker).toEqual({
      failureRatio: 0.5,
      windowMs: 10_000,
      minCalls: 5,
      minClients: 2,
      halfOpenAfterMs: 5_000,
    });
    expect(config.provider.trackedClients).toBe(10_000);
    expect(config.databaseDirectUrl).toBe(config.databaseUrl);
    expect(config.redisClusterNodes).toBeUndefined();
    expect(config.queuePrefix).toBe('payments');
    expect(config.metrics).toEqual({ apiPort: 9463, workerPort: 9464, gaugeIntervalMs: 15_000 });
    expect(config.tracing).toEqual({ endpoint: undefined, scheduleDelayMs: 5_000 });
  });

  it('reads an OTLP endpoint for the traces, without its trailing slash, and refuses what is not an http(s) URL', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_BSP_SCHEDULE_DELAY: '200' }).tracing).toEqual({
      endpoint: 'http://collector:4318',
      scheduleDelayMs: 200,
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }).tracing.endpoint).toBeUndefined();
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must use http: or https:',
    );
  });

  it('keeps a direct database URL apart from a pooled one', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://app@pgbouncer:6432/payments',
      DATABASE_DIRECT_URL: 'postgres://app@postgres:5432/payments',
    });

    expect(config.databaseUrl).toBe('postgres://app@pgbouncer:6432/payments');
    expect(config.databaseDirectUrl).toBe('postgres://app@postgres:5432/payments');
  });

  it('reads cluster nodes and puts the queue prefix in a hash tag, so every key of a queue is in one slot', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b:7001,[::1]:7002', QUEUE_PREFIX: 'shop' });

    expect(config.redisClusterNodes).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(config.queuePrefix).toBe('{shop}');
  });

  it('reads and types the values it is given', () => {
    const config = loadConfig({ PORT: '8080', PROVIDER_FAILURE_RATE: '0.25', RECONCILE_MAX_ATTEMPTS: ' 5 ' });

    expect(config.http.port).toBe(8080);
    expect(config.mockProvider.failureRate).toBe(0.25);
    expect(config.reconcile.maxAttempts).toBe(5);
  });

  it('reads PROVIDER_POISON_RATE beside PROVIDER_FAILURE_RATE, 0 by default', () => {
    expect(loadConfig({}).mockProvider.poisonRate).toBe(0);
    expect(loadConfig({ PROVIDER_POISON_RATE: '0.05' }).mockProvider.poisonRate).toBe(0.05);
    expect(loadConfig({ PROVIDER_POISON_RATE: '1' }).mockProvider.poisonRate).toBe(1);
  });

  it('reads retentions in decimal days, as tests shorten them', () => {
    const { retention } = loadConfig({ EVENTS_RETENTION_DAYS: '0.00002', PROCESSED_MESSAGES_RETENTION_DAYS: '7.5' });

    expect(retention).toMatchObject({ eventsDays: 0.00002, processedMessagesDays: 7.5 });
  });

  it('reads how statements stay planned: by name (the default), through functions, or not at all', () => {
    expect(loadConfig({}).databasePool.preparedStatements).toBe('named');
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'true' }).databasePool.preparedStatements).toBe('named');
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'functions' }).databasePool.preparedStatements).toBe('functions');
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'false' }).databasePool.preparedStatements).toBe('off');
  });

  it('refuses an endpoint share that leaves no send for the other endpoints', () => {
    expect(() => loadConfig({ WEBHOOK_CONCURRENCY: '4', WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '4' })).toThrow(
      'Invalid configuration: WEBHOOK_ENDPOINT_MAX_IN_FLIGHT must be below WEBHOOK_CONCURRENCY (4) (got "4")',
    );
  });

  it.each([
    ['PROVIDER_TIMEOUT_MS', 'abc'],
    ['PROVIDER_TIMEOUT_MS', '1.5'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://localhost/payments'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['PROVIDER_FAILURE_RATE', '1.5'],
    ['PROVIDER_POISON_RATE', '1.01'],
    ['PROVIDER_POISON_RATE', '-0.1'],
    ['PROVIDER_POISON_RATE', 'some'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_PREPARED_STATEMENTS', 'yes'],
    ['QUEUE_PREFIX', 'a b'],
    ['DATABASE_DIRECT_URL', 'redis://localhost:6379'],
    ['REDIS_CLUSTER_NODES', 'localhost'],
    ['REDIS_CLUSTER_NODES', 'a:1,b:70000'],
    ['PROVIDER_RETRY_BUDGET_CAPACITY', '0'],
    ['RECONCILE_RATE_LIMIT', '-1'],
    ['PROVIDER_RETRY_BUDGET_REFUND', '2'],
    ['PROVIDER_BREAKER_FAILURE_RATIO', '0'],
    ['PROVIDER_BREAKER_FAILURE_RATIO', '1'],
    ['PROVIDER_BREAKER_WINDOW_MS', '999'],
    ['PROVIDER_BREAKER_MIN_CALLS', '0'],
    ['PROVIDER_BREAKER_MIN_CALLS', '101'],
    ['PROVIDER_BREAKER_MIN_CLIENTS', '0'],
    ['PROVIDER_BREAKER_HALF_OPEN_MS', '0'],
    ['PROVIDER_TRACKED_CLIENTS', '0'],
    ['METRICS_GAUGE_INTERVAL_MS', '50'],
    ['METRICS_GAUGE_INTERVAL_MS', '3600001'],
    // Only true or false: a "yes" or "1" must not quietly leave the address rules on, or off.
    ['WEBHOOK_ALLOW_PRIVATE_URLS', 'yes'],
    ['WEBHOOK_ALLOW_PRIVATE_URLS', '1'],
    ['EVENTS_RETENTION_DAYS', '0'],
    ['EVENTS_RETENTION_DAYS', '-1'],
    ['EVENTS_RETENTION_DAYS', 'a month'],
    ['PROCESSED_MESSAGES_RETENTION_DAYS', '1e3'],
    ['PROCESSED_MESSAGES_RETENTION_DAYS', '3661'],
    ['RETENTION_PRUNE_BATCH_SIZE', '0'],
    // Retired: it counted every client's attempts together.
    ['PROVIDER_BREAKER_THRESHOLD', '10'],
  ])('refuses %s=%j with an error naming the variable', (variable, value) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^Invalid configuration: ${variable} `));
  });

  it('refuses a lease that a live request could outlast', () => {
    expect(() => loadConfig({ IDEMPOTENCY_LEASE_MS: '5000', PROVIDER_DEADLINE_MS: '8000' })).toThrow(
      /IDEMPOTENCY_LEASE_MS must exceed PROVIDER_DEADLINE_MS/,
    );
  });

  it('takes a crash point outside production, and refuses one in production', () => {
    expect(loadConfig({}).crashPoint).toEqual({ point: undefined, signal: 'SIGKILL' });
    expect(loadConfig({ CRASH_POINT: 'after_claim', CRASH_POINT_SIGNAL: 'SIGSTOP' }).crashPoint).toEqual({
      point: 'after_claim',
      signal: 'SIGSTOP',
    });
    expect(() => loadConfig({ CRASH_POINT: 'whenever' })).toThrow(/^Invalid configuration: CRASH_POINT must be one of /);
    expect(() => loadConfig({ NODE_ENV: 'production', SECRETS_KEY: A_KEY, CRASH_POINT: 'after_claim' })).toThrow(
      'Invalid configuration: CRASH_POINT must not be set when NODE_ENV is production (got "after_claim")',
    );
  });

  it('returns a frozen object', () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config.provider)).toBe(true);
  });

  describe('the provider events secret', () => {
    it('takes a whsec_ secret and turns events off with an empty URL', () => {
      const config = loadConfig({ PROVIDER_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}`, PROVIDER_WEBHOOK_URL: '' });
      expect(config.providerEvents.secret).toMatch(/^whsec_/);
      expect(config.mockProvider.webhookUrl).toBeUndefined();
    });

    it.each(['not-a-secret', 'whsec_c2hvcnQ='])('refuses %s in one line that does not print the secret', (secret) => {
      expect(() => loadConfig({ PROVIDER_WEBHOOK_SECRET: secret })).toThrow(
        /^Invalid configuration: PROVIDER_WEBHOOK_SECRET must be whsec_ followed by the base64 of at least 24 bytes/,
      );
    });

    it('refuses the development secret in production', () => {
      expect(() => loadConfig({ NODE_ENV: 'production', SECRETS_KEY: A_KEY })).toThrow(
        'Invalid configuration: PROVIDER_WEBHOOK_SECRET must be set to a secret of its own in production',
      );
    });
  });

  describe('the secrets key', () => {
    it('takes 32 bytes in base64, and a previous key that only opens', () => {
      const other = Buffer.alloc(32, 9).toString('base64');
      expect(loadConfig({ SECRETS_KEY: A_KEY, SECRETS_KEY_PREVIOUS: other }).secrets).toEqual({ key: A_KEY, previousKey: other });
      expect(loadConfig({}).secrets.previousKey).toBeUndefined();
    });

    it.each([Buffer.alloc(16, 1).toString('base64'), 'not base64 at all!', `${A_KEY}x`])(
      'refuses %s in one line that does not print the key',
      (key) => {
        expect(() => loadConfig({ SECRETS_KEY: key })).toThrow(/^Invalid configuration: SECRETS_KEY must be the base64 of 32 bytes/);
        expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: key })).toThrow(/^Invalid configuration: SECRETS_KEY_PREVIOUS must be the base64 of 32 bytes/);
      },
    );

    it('never uses the development key in production: no key, and the worker refuses to start', () => {
      const production = loadConfig({ NODE_ENV: 'production', PROVIDER_WEBHOOK_SECRET: `whsec_${A_KEY}` });
      expect(production.secrets.key).toBeUndefined();
      expect(() => requireSecretsKey(production)).toThrow(
        'Invalid configuration: SECRETS_KEY must be set to a key of its own in production',
      );
      expect(() => requireSecretsKey(loadConfig({ NODE_ENV: 'production', SECRETS_KEY: A_KEY, PROVIDER_WEBHOOK_SECRET: `whsec_${A_KEY}` }))).not.toThrow();
      expect(loadConfig({}).secrets.key).toBeDefined();
    });
  });
});
