import { Logger } from '@nestjs/common';
import { loadConfig } from '../config/app-config';
import { Metrics } from '../metrics/metrics';
import { ProviderBreaker } from './provider-breaker';
import { eventually } from '../../test/support/eventually';

function setup(threshold: number, halfOpenMs: number) {
  const config = loadConfig({
    PROVIDER_BREAKER_THRESHOLD: String(threshold),
    PROVIDER_BREAKER_HALF_OPEN_MS: String(halfOpenMs),
  });
  const sut = new ProviderBreaker(config, new Metrics());
  const call = (ok: boolean) => sut.run(async () => ok, (result) => !result);
  return { sut, call };
}

async function untilProbeDue(sut: ProviderBreaker): Promise<void> {
  await eventually(() => (sut.refusingForMs() === 0 ? true : undefined), {
    timeoutMs: 5_000,
    intervalMs: 10,
    what: 'the breaker to become due for a probe',
  });
}

describe(ProviderBreaker.name, () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('opens only after `threshold` consecutive failures; a success in between starts over', async () => {
    const { sut, call } = setup(2, 60_000);
    await call(false);
    await call(true);
    await call(false);
    expect(sut.state).toBe('closed');
    await call(false);
    expect(sut.state).toBe('open');
  });

  it('refuses while open, without running the call, and says for how long', async () => {
    const { sut, call } = setup(1, 60_000);
    await call(false);
    const run = jest.fn(async () => true);
    await expect(sut.run(run, () => false)).resolves.toBe('refused');
    expect(run).not.toHaveBeenCalled();
    expect(sut.refusingForMs()).toBeGreaterThan(59_000);
    expect(sut.refusingForMs()).toBeLessThanOrEqual(60_000);
  });

  it('reopens when the half-open probe fails', async () => {
    const { sut, call } = setup(1, 50);
    await call(false);
    await untilProbeDue(sut);
    await expect(call(false)).resolves.toEqual({ result: false });
    expect(sut.state).toBe('open');
    expect(sut.refusingForMs()).toBeGreaterThan(0);
  });

  it('asks callers to come back soon while a probe is under way', async () => {
    const { sut, call } = setup(1, 50);
    await call(false);
    await untilProbeDue(sut);
    let finishProbe!: (ok: boolean) => void;
    const probe = sut.run(() => new Promise<boolean>((resolve) => (finishProbe = resolve)), (ok) => !ok);
    expect(sut.state).toBe('half_open');
    expect(sut.refusingForMs()).toBe(1_000);
    finishProbe(true);
    await probe;
    expect(sut.state).toBe('closed');
    expect(sut.refusingForMs()).toBe(0);
  });

  it('lets an error thrown by the call through, without counting it', async () => {
    const { sut } = setup(1, 60_000);
    await expect(sut.run(() => Promise.reject(new Error('bug')), () => true)).rejects.toThrow('bug');
    expect(sut.state).toBe('closed');
  });
});
