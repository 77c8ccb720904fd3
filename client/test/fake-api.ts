/**
 * A scripted stand-in for the API behind the client's `fetch` option: each
 * request gets the next answer of the script (the last one repeats), and is
 * recorded with the fake clock's time, so the specs read the retry schedule
 * off the requests.
 */

export interface SentRequest {
  method: string;
  url: URL;
  headers: Headers;
  body: unknown;
  /** Date.now() when it was sent: the fake clock, under jest's fake timers. */
  at: number;
}

/** An answer: a Response to build, a network failure, or no answer until the attempt is aborted. */
export type Answer =
  | { status: number; body?: unknown; text?: string; headers?: Record<string, string> }
  | { network: string }
  | 'hang';

export interface FakeApi {
  fetch: typeof fetch;
  requests: SentRequest[];
}

export function fakeApi(script: Answer[] | ((request: SentRequest, index: number) => Answer)): FakeApi {
  const requests: SentRequest[] = [];
  const fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const request: SentRequest = {
      method: init.method ?? 'GET',
      url: new URL(String(input)),
      headers: new Headers(init.headers),
      body: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
      at: Date.now(),
    };
    requests.push(request);
    const index = requests.length - 1;
    const answer = typeof script === 'function' ? script(request, index) : script[Math.min(index, script.length - 1)];
    if (answer === 'hang') {
      return new Promise((_, reject) => {
        const signal = init.signal;
        signal?.addEventListener('abort', () => reject(signal.reason ?? new DOMException('aborted', 'AbortError')), { once: true });
      });
    }
    if ('network' in answer) {
      throw new TypeError('fetch failed', { cause: Object.assign(new Error(answer.network), { code: answer.network }) });
    }
    const text = answer.text ?? (answer.body === undefined ? '' : JSON.stringify(answer.body));
    return new Response(answer.status === 204 ? null : text, {
      status: answer.status,
      headers: { 'content-type': 'application/json', ...answer.headers },
    });
  };
  return { fetch: fetch as typeof globalThis.fetch, requests };
}

/** A payment as the API shows it. */
export function payment(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
    object: 'payment',
    amount: 500,
    currency: 'USD',
    status: 'succeeded',
    payment_method: 'pm_card_ok',
    order_id: null,
    description: null,
    metadata: {},
    provider_charge_id: 'ch_1',
    failure_code: null,
    failure_message: null,
    amount_refunded: 0,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

/** A refund as the API shows it. */
export function refund(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 're_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
    object: 'refund',
    payment: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
    amount: 300,
    currency: 'USD',
    status: 'succeeded',
    reason: null,
    metadata: {},
    provider_refund_id: 'rf_1',
    failure_code: null,
    failure_message: null,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

/** The API's error envelope. */
export function failure(code: string, extra: Record<string, unknown> = {}): { error: Record<string, unknown> } {
  return { error: { type: 'api_error', code, message: `${code} happened`, ...extra } };
}
