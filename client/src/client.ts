import { randomUUID } from 'node:crypto';
import type { BackoffOptions } from './backoff.js';
import { RetryBudget, type RetryBudgetOptions } from './retry-budget.js';
import { type CreateOptions, type GiveUpInfo, type Operation, type RequestOptions, Transport } from './transport.js';
import type {
  Event,
  EventListParams,
  Payment,
  PaymentCreateParams,
  PaymentListParams,
  Refund,
  RefundCreateParams,
  RefundListParams,
} from './types.js';
import { type VerifyOptions, type WebhookHeaders, verifyWebhook } from './webhooks.js';

export interface PaymentsClientOptions {
  /** The API's origin, e.g. https://payments.example.com (a trailing slash is fine). */
  baseUrl: string;
  /** The client's secret key, `sk_…`. Server-side only: never ship it to a browser. */
  apiKey: string;
  /** Retries after a failure, per call (polls of a 202 are not retries). Default 3. */
  maxRetries?: number;
  /** One deadline per call, over every attempt, wait and poll. Default 30 000 ms. */
  deadlineMs?: number;
  /** How long one attempt waits for its answer (never past the deadline). Default 10 000 ms. */
  timeoutMs?: number;
  /** Full-jitter exponential backoff: the first wait is at most baseMs, then 2x each time, up to capMs. Default 500 and 10 000 ms. */
  backoff?: Partial<BackoffOptions>;
  /**
   * The instance's retry budget: retries at most `ratio` of its first
   * attempts plus `burst`. Default `{ ratio: 0.1, burst: 10 }`. `false`
   * turns it off, which only an experiment should do: a fleet then sends
   * 1 + maxRetries requests per call to an API that is down.
   */
  retryBudget?: RetryBudgetOptions | false;
  /** Told of every call that ends without a final answer, just before it rejects. Must not throw. */
  onGiveUp?: (info: GiveUpInfo) => void;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Uniform on [0, 1), for the jitter; default Math.random. */
  random?: () => number;
}

const DEFAULTS = {
  maxRetries: 3,
  deadlineMs: 30_000,
  timeoutMs: 10_000,
  backoff: { baseMs: 500, capMs: 10_000 },
  retryBudget: { ratio: 0.1, burst: 10 },
} as const;

/**
 * A client of the payments API. Every call retries what can succeed later
 * and nothing else, with one idempotency key per create; see README.md.
 * Each instance has its own retry budget: share one instance across a
 * process rather than making one per request.
 */
export class PaymentsClient {
  readonly payments: Payments;
  readonly refunds: Refunds;
  readonly events: Events;
  readonly webhooks: Webhooks;
  /** This instance's retry budget; undefined when turned off. */
  readonly retryBudget: RetryBudget | undefined;

  constructor(options: PaymentsClientOptions) {
    const baseUrl = new URL(options.baseUrl).href.replace(/\/+$/, '');
    if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey is required');
    const maxRetries = options.maxRetries ?? DEFAULTS.maxRetries;
    if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new RangeError(`maxRetries must be a non-negative integer, got ${maxRetries}`);
    const deadlineMs = options.deadlineMs ?? DEFAULTS.deadlineMs;
    if (!(deadlineMs > 0)) throw new RangeError(`deadlineMs must be positive, got ${deadlineMs}`);
    const timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
    if (!(timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, got ${timeoutMs}`);
    const backoff = { ...DEFAULTS.backoff, ...options.backoff };
    if (!(backoff.baseMs >= 0 && backoff.capMs >= backoff.baseMs)) {
      throw new RangeError(`backoff needs 0 <= baseMs <= capMs, got ${backoff.baseMs} and ${backoff.capMs}`);
    }
    this.retryBudget = options.retryBudget === false ? undefined : new RetryBudget(options.retryBudget ?? DEFAULTS.retryBudget);

    const transport = new Transport({
      baseUrl,
      apiKey: options.apiKey,
      maxRetries,
      deadlineMs,
      timeoutMs,
      backoff,
      budget: this.retryBudget,
      onGiveUp: options.onGiveUp,
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      random: options.random ?? Math.random,
    });
    this.payments = new Payments(transport);
    this.refunds = new Refunds(transport);
    this.events = new Events(transport);
    this.webhooks = new Webhooks();
  }
}

export class Payments {
  constructor(private readonly transport: Transport) {}

  /**
   * POST /v1/payments. Resolves with the succeeded payment; rejects with
   * DeclineError (carrying the failed payment), PendingAtDeadlineError
   * (carrying the payment still pending when the call stopped), ApiError or
   * NetworkError.
   */
  create(params: PaymentCreateParams, options: CreateOptions = {}): Promise<Payment> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    return this.transport.call<Payment>(
      { operation: 'payments.create', method: 'POST', path: '/v1/payments', body: params, idempotencyKey, creates: 'payment' },
      options,
    );
  }

  /** GET /v1/payments/:id. */
  retrieve(id: string, options: RequestOptions = {}): Promise<Payment> {
    return this.transport.call<Payment>({ operation: 'payments.retrieve', method: 'GET', path: `/v1/payments/${encodeURIComponent(id)}` }, options);
  }

  /** Every payment, newest first, page after page (`limit` is the page size); each page is one call. */
  list(params: PaymentListParams = {}, options: RequestOptions = {}): AsyncGenerator<Payment, void, undefined> {
    return paginate<Payment>(this.transport, 'payments.list', '/v1/payments', params, options);
  }
}

export class Refunds {
  constructor(private readonly transport: Transport) {}

  /**
   * POST /v1/refunds. Resolves with the succeeded refund; rejects with
   * RefundFailedError (carrying the failed refund), PendingAtDeadlineError
   * (carrying the refund still pending), ApiError or NetworkError.
   */
  create(params: RefundCreateParams, options: CreateOptions = {}): Promise<Refund> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    return this.transport.call<Refund>(
      { operation: 'refunds.create', method: 'POST', path: '/v1/refunds', body: params, idempotencyKey, creates: 'refund' },
      options,
    );
  }

  /** GET /v1/refunds/:id. */
  retrieve(id: string, options: RequestOptions = {}): Promise<Refund> {
    return this.transport.call<Refund>({ operation: 'refunds.retrieve', method: 'GET', path: `/v1/refunds/${encodeURIComponent(id)}` }, options);
  }

  /** Every refund (of one payment with `payment`), newest first, page after page. */
  list(params: RefundListParams = {}, options: RequestOptions = {}): AsyncGenerator<Refund, void, undefined> {
    return paginate<Refund>(this.transport, 'refunds.list', '/v1/refunds', params, options);
  }
}

export class Events {
  constructor(private readonly transport: Transport) {}

  /** GET /v1/events/:id. */
  retrieve(id: string, options: RequestOptions = {}): Promise<Event> {
    return this.transport.call<Event>({ operation: 'events.retrieve', method: 'GET', path: `/v1/events/${encodeURIComponent(id)}` }, options);
  }

  /** Every event (of one `type`), newest first, page after page. */
  list(params: EventListParams = {}, options: RequestOptions = {}): AsyncGenerator<Event, void, undefined> {
    return paginate<Event>(this.transport, 'events.list', '/v1/events', params, options);
  }
}

export class Webhooks {
  /** The event of a verified delivery; throws WebhookVerificationError otherwise. See verifyWebhook. */
  verify(rawBody: string | Uint8Array, headers: WebhookHeaders, secret: string, options?: VerifyOptions): Event {
    return verifyWebhook(rawBody, headers, secret, options);
  }
}

interface Page<T> {
  data: T[];
  has_more: boolean;
}

/**
 * The items of a list route, fetching the next page (starting_after the
 * last id) only when the caller iterates past the current one.
 */
async function* paginate<T extends { id: string }>(
  transport: Transport,
  operation: Operation,
  path: string,
  params: Record<string, string | number | undefined>,
  options: RequestOptions,
): AsyncGenerator<T, void, undefined> {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && name !== 'starting_after') query.set(name, String(value));
  let cursor = params.starting_after === undefined ? undefined : String(params.starting_after);
  for (;;) {
    if (cursor !== undefined) query.set('starting_after', cursor);
    const search = query.toString();
    const page = await transport.call<Page<T>>({ operation, method: 'GET', path: search ? `${path}?${search}` : path }, options);
    yield* page.data;
    const last = page.data.at(-1);
    if (!page.has_more || last === undefined) return;
    cursor = last.id;
  }
}
