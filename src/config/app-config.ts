/**
 * The one reader of process.env. Every knob is parsed and checked once at
 * start-up into a typed, frozen object; a bad value stops the process with one
 * line naming the variable, so nothing ever runs half-configured.
 */

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(variable: string, problem: string, value: string) {
    super(`Invalid configuration: ${variable} ${problem} (got ${JSON.stringify(value)})`);
    this.name = 'ConfigError';
  }
}

class Reader {
  constructor(private readonly env: Env) {}

  private raw(name: string, fallback: string): string {
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? fallback : value.trim();
  }

  int(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const value = this.raw(name, String(fallback));
    if (!/^-?\d+$/.test(value)) throw new ConfigError(name, 'must be an integer', value);
    const n = Number(value);
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}`, value);
    return n;
  }

  /** A positive decimal number, such as 24 or 0.001. */
  positive(name: string, fallback: number, max: number): number {
    const value = this.raw(name, String(fallback));
    const n = Number(value);
    if (!/^\d*\.?\d+$/.test(value) || !(n > 0) || n > max) {
      throw new ConfigError(name, `must be a number above 0 and at most ${max}`, value);
    }
    return n;
  }

  ratio(name: string, fallback: number): number {
    const value = this.raw(name, String(fallback));
    const n = Number(value);
    if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) {
      throw new ConfigError(name, 'must be a number from 0 to 1', value);
    }
    return n;
  }

  url(name: string, fallback: string, protocols: string[]): string {
    const value = this.raw(name, fallback);
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new ConfigError(name, 'must be a URL', value);
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `must use ${protocols.join(' or ')}`, value);
    }
    return value.replace(/\/+$/, '');
  }

  /** A URL, or undefined when the variable is set to the empty string: the feature is off. */
  urlOrOff(name: string, fallback: string, protocols: string[]): string | undefined {
    return this.env[name] !== undefined && this.env[name].trim() === '' ? undefined : this.url(name, fallback, protocols);
  }

  /** A Standard Webhooks secret: `whsec_` and the base64 of at least 24 random bytes. */
  webhookSecret(name: string, fallback: string): string {
    const value = this.raw(name, fallback);
    const key = value.startsWith('whsec_') ? Buffer.from(value.slice(6), 'base64') : Buffer.alloc(0);
    if (key.length < 24 || !/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(value)) {
      throw new ConfigError(name, 'must be whsec_ followed by the base64 of at least 24 bytes', `${value.slice(0, 8)}…`);
    }
    return value;
  }

  oneOf<T extends string>(name: string, fallback: T, allowed: readonly T[]): T {
    const value = this.raw(name, fallback);
    if (!(allowed as readonly string[]).includes(value)) {
      throw new ConfigError(name, `must be one of ${allowed.join(', ')}`, value);
    }
    return value as T;
  }

  name(name: string, fallback: string): string {
    const value = this.raw(name, fallback);
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(value)) {
      throw new ConfigError(name, 'must be 1 to 64 letters, digits, dots, dashes or underscores', value);
    }
    return value;
  }

  /** 32 bytes in base64: an AES-256 key. */
  aesKey(name: string, fallback: string): string {
    const value = this.raw(name, fallback);
    if (Buffer.from(value, 'base64').length !== 32 || !/^[A-Za-z0-9+/]+={0,2}$/.test(value)) {
      throw new ConfigError(name, 'must be the base64 of 32 bytes (openssl rand -base64 32)', '…');
    }
    return value;
  }

  optionalString(name: string): string | undefined {
    const value = this.raw(name, '');
    return value === '' ? undefined : value;
  }

  /** A comma-separated list of host:port, or undefined when the variable is unset or empty. */
  hostPorts(name: string): { host: string; port: number }[] | undefined {
    const value = this.optionalString(name);
    if (value === undefined) return undefined;
    return value.split(',').map((item) => {
      const match = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$/.exec(item.trim());
      const port = Number(match?.[2]);
      if (!match || port < 1 || port > 65535) {
        throw new ConfigError(name, 'must be a comma-separated list of host:port', value);
      }
      return { host: match[1].replace(/^\[|\]$/g, ''), port };
    });
  }

  optionalOneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const value = this.optionalString(name);
    if (value !== undefined && !(allowed as readonly string[]).includes(value)) {
      throw new ConfigError(name, `must be one of ${allowed.join(', ')}`, value);
    }
    return value as T | undefined;
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const NODE_ENVS = ['development', 'production', 'test'] as const;

/** The phase boundaries where CRASH_POINT stops a process (see common/crash-point.ts). */
const CRASH_POINTS = [
  'after_claim',
  'during_provider_call',
  'before_outcome',
  'worker_mid_job',
  'worker_mid_delivery',
] as const;
export type CrashPointName = (typeof CRASH_POINTS)[number];
/** SIGKILL crashes; SIGSTOP freezes the process until it is sent SIGCONT, as a long stall would. */
const CRASH_SIGNALS = ['SIGKILL', 'SIGSTOP'] as const;
/** For development and tests only: refused when NODE_ENV is production. */
const DEVELOPMENT_WEBHOOK_SECRET = 'whsec_3fulLzZy+ihVtzUO9c06pgtiuqco2ZNO';

/** For development and tests only: refused when NODE_ENV is production. */
const DEVELOPMENT_SECRETS_KEY = 'ZGV2ZWxvcG1lbnQgb25seTogbmV2ZXIgaW4gcHJvZCE=';

/**
 * How the statements that may be planned once are kept planned
 * (StatementOptions in database/sql.ts): `named`, prepared once per
 * connection and then run by name; `functions`, run through server-side
 * functions, whose plans every server connection keeps (behind a
 * transaction-pooling PgBouncer that cannot carry a prepared statement);
 * `off`, parsed and planned at every run.
 */
export type PreparedStatements = 'named' | 'functions' | 'off';

/** DATABASE_PREPARED_STATEMENTS' values. */
const PREPARED_STATEMENTS = { true: 'named', functions: 'functions', false: 'off' } as const satisfies Record<string, PreparedStatements>;

/** Also the pool of the tools and tests that open a DataSource from a URL alone. */
export const DATABASE_POOL_DEFAULTS: { size: number; acquireTimeoutMs: number; preparedStatements: PreparedStatements } = {
  size: 20,
  acquireTimeoutMs: 5_000,
  preparedStatements: 'named',
};

/**
 * The OpenTelemetry traces: `endpoint` is where the processes export them
 * (OTLP/HTTP), undefined when unset or empty, and then no OpenTelemetry code
 * is even loaded. Read on its own too, by src/tracing/tracing.ts, which starts
 * before the rest of the configuration is read.
 */
export function tracingConfig(env: Env = process.env) {
  const r = new Reader(env);
  return {
    endpoint:
      r.optionalString('OTEL_EXPORTER_OTLP_ENDPOINT') === undefined
        ? undefined
        : r.url('OTEL_EXPORTER_OTLP_ENDPOINT', '', ['http:', 'https:']),
    /** How often the buffered spans are exported. */
    scheduleDelayMs: r.int('OTEL_BSP_SCHEDULE_DELAY', 5_000, 1, 3_600_000),
  };
}

/**
 * The key that seals the secrets kept in the database (common/secret-box.ts),
 * and while it is being changed the previous one, which only opens. Read on
 * its own too, by the migration that sealed the secrets kept in clear before.
 *
 * In production the development key is never used: without a key of its
 * own, `key` is undefined and whatever would seal or open a secret refuses
 * (the worker refuses to start, see requireSecretsKey). The API still
 * starts, since taking payments needs no secret; creating or rotating a
 * webhook endpoint then fails, naming SECRETS_KEY.
 */
export function secretsConfig(env: Env = process.env) {
  const r = new Reader(env);
  const key = r.aesKey('SECRETS_KEY', DEVELOPMENT_SECRETS_KEY);
  const production = r.oneOf('NODE_ENV', 'development', NODE_ENVS) === 'production';
  return {
    key: production && key === DEVELOPMENT_SECRETS_KEY ? undefined : key,
    previousKey: r.optionalString('SECRETS_KEY_PREVIOUS') === undefined ? undefined : r.aesKey('SECRETS_KEY_PREVIOUS', ''),
  };
}

/** For a process that cannot work without sealing or opening secrets (the worker signs every delivery). */
export function requireSecretsKey(config: Pick<AppConfig, 'secrets'>): void {
  if (config.secrets.key === undefined) throw new ConfigError('SECRETS_KEY', 'must be set to a key of its own in production', '…');
}

export function loadConfig(env: Env = process.env) {
  const r = new Reader(env);
  const databaseUrl = r.url('DATABASE_URL', 'postgres://postgres@localhost:5432/payments', ['postgres:', 'postgresql:']);
  const redisClusterNodes = r.hostPorts('REDIS_CLUSTER_NODES');
  const queuePrefix = r.name('QUEUE_PREFIX', 'payments');
  const config = {
    nodeEnv: r.oneOf('NODE_ENV', 'development', NODE_ENVS),
    logLevel: r.oneOf('LOG_LEVEL', 'info', LOG_LEVELS),
    /** Where the traces go (see tracingConfig); no endpoint: tracing is off. */
    tracing: tracingConfig(env),
    databaseUrl,
    /**
     * What needs a session of its own (the migrations' advisory lock, creating
     * the database) connects here, past a transaction-pooling PgBouncer that
     * DATABASE_URL may point at: such a pooler hands each transaction whatever
     * server connection is free, and a session-level lock would stay behind on
     * one of them.
     */
    databaseDirectUrl: r.url('DATABASE_DIRECT_URL', databaseUrl, ['postgres:', 'postgresql:']),
    databasePool: {
      size: r.int('DATABASE_POOL_SIZE', DATABASE_POOL_DEFAULTS.size, 1, 1_000),
      /** How long a request waits for a free connection before its 503. */
      acquireTimeoutMs: r.int('DATABASE_POOL_TIMEOUT_MS', DATABASE_POOL_DEFAULTS.acquireTimeoutMs, 1),
      /**
       * `true`: statements prepared once per connection and run by name (see
       * database/sql.ts); `functions` behind a transaction-pooling PgBouncer
       * without protocol-level prepared statement support (see
       * database/statement-functions.ts); `false`: neither.
       */
      preparedStatements: PREPARED_STATEMENTS[r.oneOf('DATABASE_PREPARED_STATEMENTS', 'true', ['true', 'functions', 'false'])],
    },
    redisUrl: r.url('REDIS_URL', 'redis://localhost:6379', ['redis:', 'rediss:']),
    /** Seed nodes of a Redis Cluster; when set, REDIS_URL is not used. */
    redisClusterNodes,
    /**
     * Namespace of the BullMQ keys in Redis; lets several stacks (or test runs)
     * share one Redis. On a cluster it is a hash tag, `{payments}`: BullMQ's
     * scripts touch several keys of a queue at once, and a cluster runs a
     * script only when all its keys hash to one slot.
     */
    queuePrefix: redisClusterNodes === undefined ? queuePrefix : `{${queuePrefix}}`,
    /** Where each process serves GET /metrics, apart from the public API port (0: a free port, as tests use). */
    metrics: {
      apiPort: r.int('METRICS_PORT', 9463, 0, 65535),
      workerPort: r.int('WORKER_METRICS_PORT', 9464, 0, 65535),
      /**
       * How often each worker recomputes its database-wide gauges (payments
       * and deliveries pending, reviews, queue depths): two indexed statements
       * and one Redis round trip per queue each time, whatever the load.
       */
      gaugeIntervalMs: r.int('METRICS_GAUGE_INTERVAL_MS', 15_000, 100, 3_600_000),
    },
    http: {
      port: r.int('PORT', 3000, 0, 65535),
      /** How long SIGTERM waits for in-flight requests before the process exits anyway. */
      shutdownGraceMs: r.int('SHUTDOWN_GRACE_MS', 10_000, 0),
      /** The longest a client may take to send a whole request, headers and body (a slow body is cut off). */
      requestTimeoutMs: r.int('HTTP_REQUEST_TIMEOUT_MS', 10_000, 1_000),
      /** Proxies in front of the API whose X-Forwarded-For is believed (0: the TCP peer is the client). */
      trustProxyHops: r.int('TRUST_PROXY_HOPS', 0, 0, 10),
    },
    /** Per client and per API process: a guard against a runaway client, not a quota. */
    rateLimit: {
      requests: r.int('RATE_LIMIT_REQUESTS', 6_000, 1),
      windowMs: r.int('RATE_LIMIT_WINDOW_MS', 60_000, 1_000),
      /** Failed authentications per address per window, per API process, before the address gets 429s. */
      authFailures: r.int('AUTH_FAILURE_LIMIT', 20, 1),
      authFailureWindowMs: r.int('AUTH_FAILURE_WINDOW_MS', 60_000, 1_000),
    },
    /**
     * A key's lookup is reused by this process for ttlMs (0: every request
     * looks it up), for up to maxKeys keys: a key revoked or rolled keeps
     * working here, or goes on without its new end, for at most ttlMs. At
     * most a second, so that every process refuses a revoked key within the
     * promised 2 s with room for a slow lookup.
     */
    authCache: {
      ttlMs: r.int('AUTH_CACHE_TTL_MS', 1_000, 0, 1_000),
      maxKeys: r.int('AUTH_CACHE_KEYS', 10_000, 1, 1_000_000),
    },
    /** How often at most each API process writes its keys' last use (ApiKeyUsage): last_used_at lags by up to this. */
    apiKeyUsageFlushMs: r.int('API_KEY_LAST_USED_FLUSH_MS', 60_000, 100, 3_600_000),
    idempotency: {
      /** Counted from the stored answer; a key without one (its payment not final) never expires. */
      keyTtlHours: r.positive('IDEMPOTENCY_KEY_TTL_HOURS', 24, 24 * 366),
      leaseMs: r.int('IDEMPOTENCY_LEASE_MS', 30_000, 100),
      /** Final answers this process keeps to replay without Postgres, until their key expires (0: none). */
      answerCacheEntries: r.int('REPLAY_CACHE_ENTRIES', 10_000, 0, 1_000_000),
    },
    provider: {
      url: r.url('PROVIDER_URL', 'http://localhost:4010', ['http:', 'https:']),
      timeoutMs: r.int('PROVIDER_TIMEOUT_MS', 2_000, 1),
      maxAttempts: r.int('PROVIDER_MAX_ATTEMPTS', 3, 1, 10),
      deadlineMs: r.int('PROVIDER_DEADLINE_MS', 8_000, 1),
      backoffBaseMs: r.int('PROVIDER_BACKOFF_BASE_MS', 100, 0),
      backoffCapMs: r.int('PROVIDER_BACKOFF_CAP_MS', 1_000, 0),
      /** The largest answer body read; a charge is a few hundred bytes, so a larger body is not one. */
      maxBodyBytes: r.int('PROVIDER_MAX_BODY_BYTES', 65_536, 1_024, 16_777_216),
      /** One per API client: each retry spends a token, each first attempt refunds `refund`. */
      retryBudget: {
        capacity: r.int('PROVIDER_RETRY_BUDGET_CAPACITY', 10, 1, 1_000_000),
        refund: r.ratio('PROVIDER_RETRY_BUDGET_REFUND', 0.1),
      },
      /**
       * One circuit per API client, rate-based over whole calls; the provider-wide
       * circuit opens only when the open ones are several clients and most of the
       * active ones (see provider-breaker.ts).
       */
      breaker: {
        failureRatio: r.ratio('PROVIDER_BREAKER_FAILURE_RATIO', 0.5),
        windowMs: r.int('PROVIDER_BREAKER_WINDOW_MS', 10_000, 1_000, 3_600_000),
        minCalls: r.int('PROVIDER_BREAKER_MIN_CALLS', 5, 1, 100),
        minClients: r.int('PROVIDER_BREAKER_MIN_CLIENTS', 2, 1, 1_000_000),
        halfOpenAfterMs: r.int('PROVIDER_BREAKER_HALF_OPEN_MS', 5_000, 1),
      },
      /** Clients whose circuit and retry budget a process keeps; past it the least recently seen is forgotten. */
      trackedClients: r.int('PROVIDER_TRACKED_CLIENTS', 10_000, 1, 1_000_000),
    },
    reconcile: {
      intervalMs: r.int('RECONCILE_INTERVAL_MS', 10_000, 50),
      staleAfterMs: r.int('RECONCILE_STALE_AFTER_MS', 60_000, 0),
      maxAttempts: r.int('RECONCILE_MAX_ATTEMPTS', 8, 1),
      backoffBaseMs: r.int('RECONCILE_BACKOFF_BASE_MS', 5_000, 1),
      backoffCapMs: r.int('RECONCILE_BACKOFF_CAP_MS', 600_000, 1),
      /** The most reconcile jobs queued at once; in a backlog the sweep tops the queue up as the workers take them. */
      batchSize: r.int('RECONCILE_BATCH_SIZE', 500, 1, 10_000),
      concurrency: r.int('RECONCILE_CONCURRENCY', 8, 1, 100),
      /**
       * Payments reconciled per second at most, across every worker of the
       * queue (0: as fast as the workers go). A backlog's drain takes CPU and
       * Postgres from new payments; by default it takes a share that drains
       * 10,000 stale payments in under a minute (see reconcileLimiter).
       */
      paymentsPerS: r.int('RECONCILE_RATE_LIMIT', 250, 0, 100_000),
      /** How often a payment in review is asked about again, and for how long after it went to review. */
      reviewRecheckIntervalMs: r.int('REVIEW_RECHECK_INTERVAL_MS', 3_600_000, 50),
      reviewRecheckHorizonHours: r.positive('REVIEW_RECHECK_HORIZON_HOURS', 168, 24 * 366),
    },
    /**
     * A prune run deletes batch after batch while they come back full, for at
     * most runBudgetMs; the next run, one interval later, goes on from there.
     */
    keyPrune: {
      intervalMs: r.int('KEY_PRUNE_INTERVAL_MS', 60_000, 50),
      batchSize: r.int('KEY_PRUNE_BATCH_SIZE', 1_000, 1, 100_000),
      runBudgetMs: r.int('KEY_PRUNE_RUN_BUDGET_MS', 30_000, 1),
    },
    /**
     * How long events (with their settled deliveries) and processed provider
     * messages are kept, in decimal days, and the worker's prune of what is
     * older: every interval, full batches one after another for at most
     * runBudgetMs; the next run goes on from there.
     */
    retention: {
      eventsDays: r.positive('EVENTS_RETENTION_DAYS', 30, 3_660),
      processedMessagesDays: r.positive('PROCESSED_MESSAGES_RETENTION_DAYS', 30, 3_660),
      intervalMs: r.int('RETENTION_PRUNE_INTERVAL_MS', 60_000, 50),
      batchSize: r.int('RETENTION_PRUNE_BATCH_SIZE', 1_000, 1, 100_000),
      runBudgetMs: r.int('RETENTION_PRUNE_RUN_BUDGET_MS', 30_000, 1),
    },
    /**
     * Merchant webhooks: every dispatch interval the worker claims due
     * deliveries (at most maxInFlightPerEndpoint held at once per endpoint, so
     * a slow or dead endpoint holds that many of the `concurrency` sends and
     * no more) and sends each with a timeout; a failure waits equal jitter on
     * min(cap, base·2^n) and the delivery is failed once the next attempt
     * would fall past the horizon, counted from the event's commit.
     */
    webhooks: {
      dispatchIntervalMs: r.int('WEBHOOK_DISPATCH_INTERVAL_MS', 1_000, 50),
      timeoutMs: r.int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
      backoffBaseMs: r.int('WEBHOOK_BACKOFF_BASE_MS', 5_000, 1),
      backoffCapMs: r.int('WEBHOOK_BACKOFF_CAP_MS', 3_600_000, 1),
      retryHorizonHours: r.positive('WEBHOOK_RETRY_HORIZON_HOURS', 72, 24 * 366),
      concurrency: r.int('WEBHOOK_CONCURRENCY', 16, 2, 256),
      maxInFlightPerEndpoint: r.int('WEBHOOK_ENDPOINT_MAX_IN_FLIGHT', 4, 1, 256),
      batchSize: r.int('WEBHOOK_BATCH_SIZE', 200, 1, 10_000),
      /**
       * Endpoints on loopback, private, link-local and other special-purpose
       * addresses are allowed, at registration and at delivery (local demos
       * and tests only: see merchant-events/webhook-url-policy.ts).
       */
      allowPrivateUrls: r.oneOf('WEBHOOK_ALLOW_PRIVATE_URLS', 'false', ['true', 'false']) === 'true',
    },
    mockProvider: {
      port: r.int('PROVIDER_PORT', 4010, 0, 65535),
      failureRate: r.ratio('PROVIDER_FAILURE_RATE', 0),
      /**
       * Share of 2xx charge and refund answers whose body is replaced, after
       * the charge or refund is recorded as usual, by one the API cannot use
       * (U+0000, a lone surrogate, an over-long failure_code, a wrong type, a
       * missing field, not JSON, cut short): what was recorded stays true,
       * only that one answer lies. For chaos runs.
       */
      poisonRate: r.ratio('PROVIDER_POISON_RATE', 0),
      latencyMs: r.int('PROVIDER_LATENCY_MS', 0, 0),
      /** pm_card_timeout holds its first reply this long: longer than PROVIDER_TIMEOUT_MS. */
      slowReplyMs: r.int('PROVIDER_SLOW_REPLY_MS', 5_000, 0),
      /** pm_card_pending charges settle to succeeded after this long. */
      pendingSettleMs: r.int('PROVIDER_PENDING_SETTLE_MS', 3_000, 0),
      /** Where charges are journaled so they survive a restart of the provider itself. */
      dataFile: r.optionalString('PROVIDER_DATA_FILE'),
      /** Where the provider delivers its charge events; undefined (set empty) turns them off. */
      webhookUrl: r.urlOrOff('PROVIDER_WEBHOOK_URL', 'http://localhost:3000/v1/provider/events', ['http:', 'https:']),
      /** Share of events delivered a second time, and the random delay before each delivery, for tests. */
      webhookDuplicateRate: r.ratio('PROVIDER_WEBHOOK_DUPLICATE_RATE', 0),
      webhookMaxDelayMs: r.int('PROVIDER_WEBHOOK_MAX_DELAY_MS', 0, 0, 600_000),
    },
    /** Signs the provider's events (mock provider) and verifies them (API): the same secret on both sides. */
    providerEvents: {
      secret: r.webhookSecret('PROVIDER_WEBHOOK_SECRET', DEVELOPMENT_WEBHOOK_SECRET),
    },
    secrets: secretsConfig(env),
    /** Fault injection for the crash tests; refused in production. */
    crashPoint: {
      point: r.optionalOneOf('CRASH_POINT', CRASH_POINTS),
      signal: r.oneOf('CRASH_POINT_SIGNAL', 'SIGKILL', CRASH_SIGNALS),
    },
  };
  if (config.nodeEnv === 'production' && config.crashPoint.point !== undefined) {
    throw new ConfigError('CRASH_POINT', 'must not be set when NODE_ENV is production', config.crashPoint.point);
  }
  if (config.nodeEnv === 'production' && config.providerEvents.secret === DEVELOPMENT_WEBHOOK_SECRET) {
    throw new ConfigError('PROVIDER_WEBHOOK_SECRET', 'must be set to a secret of its own in production', 'whsec_…');
  }
  const retiredThreshold = r.optionalString('PROVIDER_BREAKER_THRESHOLD');
  if (retiredThreshold !== undefined) {
    // It counted consecutive attempts of every client together; a deployment that
    // set it must learn that it is gone rather than run with other thresholds.
    throw new ConfigError(
      'PROVIDER_BREAKER_THRESHOLD',
      'is no longer read: use PROVIDER_BREAKER_MIN_CALLS and PROVIDER_BREAKER_FAILURE_RATIO',
      retiredThreshold,
    );
  }
  if (config.webhooks.maxInFlightPerEndpoint >= config.webhooks.concurrency) {
    // One endpoint that never answers must leave sends free for everyone else.
    throw new ConfigError(
      'WEBHOOK_ENDPOINT_MAX_IN_FLIGHT',
      `must be below WEBHOOK_CONCURRENCY (${config.webhooks.concurrency})`,
      String(config.webhooks.maxInFlightPerEndpoint),
    );
  }
  const { failureRatio } = config.provider.breaker;
  if (!(failureRatio > 0 && failureRatio < 1)) {
    throw new ConfigError('PROVIDER_BREAKER_FAILURE_RATIO', 'must be above 0 and below 1', String(failureRatio));
  }
  if (config.provider.timeoutMs > config.provider.deadlineMs) {
    throw new ConfigError(
      'PROVIDER_TIMEOUT_MS',
      `must not exceed PROVIDER_DEADLINE_MS (${config.provider.deadlineMs})`,
      String(config.provider.timeoutMs),
    );
  }
  if (config.provider.deadlineMs >= config.idempotency.leaseMs) {
    // A request that is still within its provider deadline must never lose its lease.
    throw new ConfigError(
      'IDEMPOTENCY_LEASE_MS',
      `must exceed PROVIDER_DEADLINE_MS (${config.provider.deadlineMs})`,
      String(config.idempotency.leaseMs),
    );
  }
  return deepFreeze(config);
}

function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value)) {
    if (child && typeof child === 'object') deepFreeze(child);
  }
  return Object.freeze(value);
}

export type AppConfig = ReturnType<typeof loadConfig>;

/** Injection token for the validated configuration. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/** Load the configuration or end the process with the one line that says why. */
export function loadConfigOrExit(env: Env = process.env): AppConfig {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
