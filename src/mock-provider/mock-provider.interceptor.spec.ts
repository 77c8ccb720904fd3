import type { CallHandler } from '@nestjs/common';
import { of } from 'rxjs';
import { loadConfig } from '../config/app-config';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { FaultInjectionInterceptor } from './mock-provider.interceptor';

function setup(env: Record<string, string>) {
  const handled = of('handled');
  const next: CallHandler & { handle: jest.Mock } = { handle: jest.fn(() => handled) };
  return { sut: new FaultInjectionInterceptor(loadConfig(env)), next, handled };
}

describe(FaultInjectionInterceptor.name, () => {
  it('passes every call through when no fault is configured', async () => {
    const { sut, next, handled } = setup({});

    await expect(sut.intercept(undefined, next)).resolves.toBe(handled);
    expect(next.handle).toHaveBeenCalledTimes(1);
  });

  it('answers 503 without reaching the handler when PROVIDER_FAILURE_RATE is 1', async () => {
    const { sut, next } = setup({ PROVIDER_FAILURE_RATE: '1' });

    const error: unknown = await sut.intercept(undefined, next).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(MockProviderError);
    expect((error as MockProviderError).code).toBe(MockProviderErrorCode.ServiceUnavailable);
    expect(next.handle).not.toHaveBeenCalled();
  });

  it('delays the handler by PROVIDER_LATENCY_MS', async () => {
    const { sut, next } = setup({ PROVIDER_LATENCY_MS: '100' });
    const started = performance.now();

    await sut.intercept(undefined, next);

    // Timers may fire up to a millisecond early on coarse clocks.
    expect(performance.now() - started).toBeGreaterThanOrEqual(99);
    expect(next.handle).toHaveBeenCalledTimes(1);
  });
});
