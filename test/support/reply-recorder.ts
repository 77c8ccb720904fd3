import type { Random } from './random';

/**
 * What the client library's callers in the harness (the chaos run, the
 * infrastructure-fault tests) saw on the wire: every attempt a
 * PaymentsClient sent under an Idempotency-Key, and its answer or the lack
 * of one. The library keeps its attempts to itself, as it should; the
 * judgement of a run needs each of them (a 500 anywhere, a hang while
 * Postgres was down, every payment an answer named), so the recorder is the
 * `fetch` the client is given, and it only watches.
 */

/** What an answer's body says: its error code, and the payment or refund it names. */
export interface BodyFacts {
  /** The error code, for an error envelope. */
  code?: string;
  /** The payment the body names: the payment object's id, or the one embedded in a decline. */
  paymentId?: string;
  paymentStatus?: string;
  /** The refund the body names: the refund object's id, or the one embedded in a 402 refund_failed. */
  refundId?: string;
  refundStatus?: string;
  /** The amount of the payment or refund the body names. */
  amount?: number;
  /** The provider's charge of the payment named, once it has one. */
  chargeId?: string;
}

/** One answer, or the lack of one, as the client saw it; `at` is when it was sent (epoch ms), `ms` how long it took. */
export type Reply =
  | (BodyFacts & { kind: 'http'; status: number; replayed: boolean; at: number; ms: number })
  | { kind: 'network'; error: string; at: number; ms: number };

export type HttpReply = Extract<Reply, { kind: 'http' }>;

/** The label of an attempt the client gave up on at its timeout. */
export const CLIENT_TIMEOUT_ERROR = 'TimeoutError';

/**
 * The replies of each key the recorder is told to watch, in the order they
 * came. One key is watched by one caller at a time (a key reused with
 * another body is reused after its first call ended).
 */
export class ReplyRecorder {
  private readonly watched = new Map<string, Reply[]>();

  /**
   * @param upstreams when given, each attempt goes to one of these origins,
   *   drawn with `random`, whatever the client's baseUrl: the load balancer
   *   in front of several APIs.
   */
  constructor(private readonly upstreams?: { urls: readonly string[]; random: Random }) {}

  /** Starts keeping the replies to requests under `key`; the array fills as they come. */
  watch(key: string): Reply[] {
    const replies: Reply[] = [];
    this.watched.set(key, replies);
    return replies;
  }

  /** Stops keeping them; what was kept stays in the array `watch` returned. */
  unwatch(key: string): void {
    this.watched.delete(key);
  }

  /** The fetch to give a PaymentsClient. */
  readonly fetch: typeof fetch = async (input, init) => {
    const url = this.route(input instanceof Request ? input.url : String(input));
    const key = new Headers(init?.headers).get('idempotency-key');
    const replies = key === null ? undefined : this.watched.get(key);
    const started = Date.now();
    try {
      const response = await fetch(url, init);
      // A copy of the body, read here: the client reads its own.
      const facts = describeBody(await response.clone().text());
      replies?.push({
        kind: 'http',
        status: response.status,
        ...facts,
        replayed: response.headers.get('idempotent-replayed') === 'true',
        at: started,
        ms: Date.now() - started,
      });
      return response;
    } catch (error) {
      replies?.push({ kind: 'network', error: errorName(error), at: started, ms: Date.now() - started });
      throw error;
    }
  };

  private route(url: string): string {
    if (!this.upstreams) return url;
    const { urls, random } = this.upstreams;
    const { pathname, search } = new URL(url);
    return `${urls[Math.floor(random() * urls.length)]}${pathname}${search}`;
  }
}

/** The facts of a body of the API's: a payment or refund, or an error envelope, which may embed one. */
export function describeBody(text: string): BodyFacts {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {};
  }
  const record = (value: unknown) => (value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined);
  const error = record(record(body)?.error);
  // A refund object, or the one a 402 refund_failed embeds; else a payment, or the one a decline embeds.
  const refund = error ? record(error.refund) : record(body)?.object === 'refund' ? record(body) : undefined;
  const payment = refund ? undefined : error ? record(error.payment) : record(body);
  const named = refund ?? payment;
  return {
    code: typeof error?.code === 'string' ? error.code : undefined,
    paymentId: typeof payment?.id === 'string' ? payment.id : undefined,
    paymentStatus: typeof payment?.status === 'string' ? payment.status : undefined,
    refundId: typeof refund?.id === 'string' ? refund.id : undefined,
    refundStatus: typeof refund?.status === 'string' ? refund.status : undefined,
    amount: typeof named?.amount === 'number' ? named.amount : undefined,
    chargeId: typeof payment?.provider_charge_id === 'string' ? payment.provider_charge_id : undefined,
  };
}

/**
 * A failed fetch's cause code (ECONNREFUSED, UND_ERR_SOCKET…), or its name.
 * The client ends an attempt at its timeout by aborting it, and the harness
 * passes no signal of its own, so an abort is a timeout.
 */
function errorName(error: unknown): string {
  const { name, cause } = (error ?? {}) as { name?: unknown; cause?: { code?: unknown } };
  if (typeof cause?.code === 'string') return cause.code;
  if (name === 'AbortError') return CLIENT_TIMEOUT_ERROR;
  return typeof name === 'string' ? name : String(error);
}
