import { type CallHandler, type ExecutionContext, Logger } from '@nestjs/common';
import express from 'express';
import { lastValueFrom, of } from 'rxjs';
import request from 'supertest';
import { loadConfig } from '../config/app-config';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { FaultInjectionInterceptor, POISON_KINDS, type PoisonKind, poisonedBody } from './mock-provider.interceptor';
import type { Charge } from './mock-provider.types';

function setup(env: Record<string, string>, headers: Record<string, string> = {}) {
  const handled = of('handled');
  const next: CallHandler & { handle: jest.Mock } = { handle: jest.fn(() => handled) };
  const request = { header: (name: string) => headers[name.toLowerCase()] };
  const getResponse = jest.fn();
  const context = { switchToHttp: () => ({ getRequest: () => request, getResponse }) } as unknown as ExecutionContext;
  return { sut: new FaultInjectionInterceptor(loadConfig(env)), next, handled, context, getResponse };
}

const CHARGE: Charge = {
  id: 'ch_01JDQ2ZC4R5S8V9W0X1Y2Z3A4C',
  status: 'failed',
  amount: 500,
  currency: 'USD',
  failure_code: 'do_not_honor',
  reference: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
  idempotency_key: 'pk_pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
  created_at: '2026-01-01T00:00:00.000Z',
};

const codePoints = (text: string) => [...text].length;
/** Text a Postgres text column holds: no U+0000, no lone surrogate. */
const storable = (text: string) => !text.includes('\u0000') && !/\p{Cs}/u.test(text);

/**
 * Whether a body is a charge the API may act on, by the contract of issue 23:
 * the shape of parseProviderCharge, every string storable, the id 1 to 255
 * code points and failure_code at most 100.
 */
function usable(text: string): boolean {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof body !== 'object' || body === null) return false;
  const { id, status, amount, currency, failure_code: code } = body as Record<string, unknown>;
  return (
    typeof id === 'string' && storable(id) && codePoints(id) >= 1 && codePoints(id) <= 255 &&
    typeof status === 'string' && ['succeeded', 'failed', 'pending'].includes(status) &&
    Number.isSafeInteger(amount) &&
    typeof currency === 'string' && /^[A-Z]{3}$/.test(currency) &&
    (code === null || (typeof code === 'string' && storable(code) && codePoints(code) <= 100))
  );
}

/** The body as text, whatever its Content-Type says (supertest would parse it as JSON, and throw). */
async function postText(app: express.Express, status: number): Promise<{ text: string; contentType: string }> {
  const answer = await request(app)
    .post('/charges')
    .buffer(true)
    .parse((response, done) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => done(null, text));
    })
    .expect(status);
  return { text: answer.body as string, contentType: String(answer.headers['content-type']) };
}

/**
 * A one-route express app answering as the controller does (status, then
 * response.json) behind the interceptor; `recorded` counts handler runs, the
 * charges the provider would have recorded.
 */
function wireApp(env: Record<string, string>, status = 201) {
  const sut = new FaultInjectionInterceptor(loadConfig(env));
  const charge = structuredClone(CHARGE);
  const state = { recorded: 0 };
  const app = express();
  app.post('/charges', async (req, res) => {
    const context = { switchToHttp: () => ({ getRequest: () => req, getResponse: () => res }) } as unknown as ExecutionContext;
    const next: CallHandler = {
      handle: () => {
        state.recorded++;
        res.status(status).json(charge);
        return of(undefined);
      },
    };
    await lastValueFrom(await sut.intercept(context, next));
  });
  return { app, charge, state };
}

async function errorCode(work: Promise<unknown>): Promise<MockProviderErrorCode> {
  const error: unknown = await work.catch((e: unknown) => e);
  if (!(error instanceof MockProviderError)) throw new Error(`expected a MockProviderError, got ${String(error)}`);
  return error.code;
}

describe(FaultInjectionInterceptor.name, () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('passes every call through when no fault is configured', async () => {
    const { sut, next, handled, context } = setup({});

    await expect(sut.intercept(context, next)).resolves.toBe(handled);
    expect(next.handle).toHaveBeenCalledTimes(1);
  });

  it('answers 503 without reaching the handler when PROVIDER_FAILURE_RATE is 1', async () => {
    const { sut, next, context } = setup({ PROVIDER_FAILURE_RATE: '1' });

    await expect(errorCode(sut.intercept(context, next))).resolves.toBe(MockProviderErrorCode.ServiceUnavailable);
    expect(next.handle).not.toHaveBeenCalled();
  });

  it('delays the handler by PROVIDER_LATENCY_MS', async () => {
    const { sut, next, context } = setup({ PROVIDER_LATENCY_MS: '100' });
    const started = performance.now();

    await sut.intercept(context, next);

    // Timers may fire up to a millisecond early on coarse clocks.
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    expect(next.handle).toHaveBeenCalledTimes(1);
  });

  it('refuses, without reaching the handler, a request whose caller stopped waiting during the latency', async () => {
    const { sut, next, context } = setup({ PROVIDER_LATENCY_MS: '100' }, { 'x-request-deadline-ms': '30' });

    await expect(errorCode(sut.intercept(context, next))).resolves.toBe(MockProviderErrorCode.DeadlineExceeded);
    expect(next.handle).not.toHaveBeenCalled();
  });

  it('serves a request whose deadline outlasts the latency', async () => {
    const { sut, next, handled, context } = setup({ PROVIDER_LATENCY_MS: '30' }, { 'x-request-deadline-ms': '5000' });

    await expect(sut.intercept(context, next)).resolves.toBe(handled);
  });

  it('refuses a deadline of 0 at once, and ignores one it cannot read', async () => {
    const gone = setup({}, { 'x-request-deadline-ms': '0' });
    await expect(errorCode(gone.sut.intercept(gone.context, gone.next))).resolves.toBe(
      MockProviderErrorCode.DeadlineExceeded,
    );

    for (const value of ['soon', '-5', '1.5', '']) {
      const { sut, next, handled, context } = setup({}, { 'x-request-deadline-ms': value });
      await expect(sut.intercept(context, next)).resolves.toBe(handled);
    }
  });

  describe('PROVIDER_POISON_RATE', () => {
    afterEach(() => jest.restoreAllMocks());

    it('leaves the response alone when it is 0, the default', async () => {
      const { sut, next, handled, context, getResponse } = setup({});

      await expect(sut.intercept(context, next)).resolves.toBe(handled);
      expect(getResponse).not.toHaveBeenCalled();
    });

    it('poisons the share of answers it says: a draw below the rate is poisoned, one at or above it is not', async () => {
      const random = jest.spyOn(Math, 'random');
      for (const [draw, poisoned] of [[0.2, true], [0.25, false], [0.9, false]] as const) {
        const { sut, next, context, getResponse } = setup({ PROVIDER_POISON_RATE: '0.25' });
        getResponse.mockReturnValue({ json: jest.fn() });
        random.mockReturnValue(draw);

        await sut.intercept(context, next);

        expect(getResponse).toHaveBeenCalledTimes(poisoned ? 1 : 0);
        expect(next.handle).toHaveBeenCalledTimes(1);
      }
    });

    it('records the charge as usual and lies only in that answer: an unusable body, the charge object untouched', async () => {
      const { app, charge, state } = wireApp({ PROVIDER_POISON_RATE: '1' });
      const bodies = new Set<string>();

      for (let i = 0; i < 40; i++) {
        const answer = await postText(app, 201);
        expect(answer.contentType).toMatch(/^application\/json/);
        expect(usable(answer.text)).toBe(false);
        bodies.add(answer.text);
      }

      expect(state.recorded).toBe(40);
      expect(charge).toEqual(CHARGE);
      // Drawn at random among the kinds: forty answers are not all alike.
      expect(bodies.size).toBeGreaterThan(3);
    });

    it('answers the charge as it is when the rate is 0', async () => {
      const { app } = wireApp({});

      const answer = await postText(app, 201);

      expect(JSON.parse(answer.text)).toEqual(CHARGE);
      expect(usable(answer.text)).toBe(true);
    });

    it('never poisons an answer that is not a 2xx', async () => {
      const { app, state } = wireApp({ PROVIDER_POISON_RATE: '1' }, 422);

      const answer = await postText(app, 422);

      expect(JSON.parse(answer.text)).toEqual(CHARGE);
      expect(state.recorded).toBe(1);
    });
  });
});

describe(poisonedBody.name, () => {
  const parsed = (kind: PoisonKind, draw = 0.2) => JSON.parse(poisonedBody(CHARGE, kind, () => draw)) as Record<string, unknown>;

  it.each(POISON_KINDS.map((kind) => [kind]))('makes %s an answer the API must not use', (kind) => {
    for (const draw of [0, 0.3, 0.5, 0.7, 0.99]) {
      expect(usable(poisonedBody(CHARGE, kind, () => draw))).toBe(false);
      expect(usable(poisonedBody({ ...CHARGE, status: 'succeeded', failure_code: null }, kind, () => draw))).toBe(false);
    }
  });

  it('holds U+0000 and a lone surrogate as JSON escapes, in a body that is otherwise the charge', () => {
    expect(poisonedBody(CHARGE, 'nul_in_failure_code', Math.random)).toContain('"failure_code":"do_not_honor\\u0000"');
    expect(parsed('nul_in_failure_code')).toEqual({ ...CHARGE, failure_code: 'do_not_honor\u0000' });
    expect(parsed('nul_in_id')).toEqual({ ...CHARGE, id: `${CHARGE.id}\u0000` });
    expect(poisonedBody(CHARGE, 'lone_surrogate', () => 0.2)).toContain(`"id":"${CHARGE.id}\\ud800"`);
    expect(poisonedBody(CHARGE, 'lone_surrogate', () => 0.7)).toContain('"failure_code":"do_not_honor\\ud800"');
    expect(parsed('lone_surrogate', 0.7)).toEqual({ ...CHARGE, failure_code: 'do_not_honor\ud800' });
  });

  it('makes a 300-character failure_code, an amount as a string, and leaves one field out', () => {
    expect(parsed('long_failure_code').failure_code).toHaveLength(300);
    expect(parsed('amount_as_string').amount).toBe('500');
    expect(Object.keys(parsed('missing_field', 0))).not.toContain('id');
    expect(Object.keys(parsed('missing_field', 0.99))).not.toContain('failure_code');
    expect(Object.keys(parsed('missing_field', 0.99))).toHaveLength(Object.keys(CHARGE).length - 1);
  });

  it('poisons a refund answer alike, and may leave out the id of its charge', () => {
    const refund = { ...CHARGE, id: 'rf_1', object: 'refund', charge: CHARGE.id };
    const poisoned = (kind: PoisonKind, draw: number) => JSON.parse(poisonedBody(refund, kind, () => draw)) as Record<string, unknown>;

    expect(Object.keys(poisoned('missing_field', 0.99))).not.toContain('charge');
    expect(Object.keys(poisoned('missing_field', 0.99))).toHaveLength(Object.keys(refund).length - 1);
    expect(poisoned('nul_in_id', 0)).toEqual({ ...refund, id: 'rf_1\u0000' });
  });

  it('answers with text that is not JSON, or JSON cut short', () => {
    expect(() => JSON.parse(poisonedBody(CHARGE, 'not_json', Math.random))).toThrow(SyntaxError);
    for (const draw of [0, 0.5, 0.999]) {
      const text = poisonedBody(CHARGE, 'truncated_json', () => draw);
      expect(JSON.stringify(CHARGE).startsWith(text)).toBe(true);
      expect(() => JSON.parse(text)).toThrow(SyntaxError);
    }
  });

  it('works on a copy: the charge it is given is unchanged', () => {
    const charge = structuredClone(CHARGE);
    for (const kind of POISON_KINDS) poisonedBody(charge, kind, () => 0.4);

    expect(charge).toEqual(CHARGE);
  });
});
