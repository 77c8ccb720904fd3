import { type CallHandler, type ExecutionContext, Logger } from '@nestjs/common';
import { of } from 'rxjs';
import { loadConfig } from '../config/app-config';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { FaultInjectionInterceptor } from './mock-provider.interceptor';

function setup(env: Record<string, string>, headers: Record<string, string> = {}) {
  const handled = of('handled');
  const next: CallHandler & { handle: jest.Mock } = { handle: jest.fn(() => handled) };
  const request = { header: (name: string) => headers[name.toLowerCase()] };
  const context = { switchToHttp: () => ({ getRequest: () => request }) } as unknown as ExecutionContext;
  return { sut: new FaultInjectionInterceptor(loadConfig(env)), next, handled, context };
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
});
