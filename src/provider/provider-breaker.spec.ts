import { Logger } from '@nestjs/common';
import { loadConfig } from '../config/app-config';
import { Metrics } from '../metrics/metrics';
import { ProviderBreaker } from './provider-breaker';

const A = 'client_a';
const B = 'client_b';
const C = 'client_c';
const D = 'client_d';

/** Circuits of 4 calls or more, more than half failed; a minute open unless told otherwise. */
function setup(env: Record<string, string> = {}) {
  const config = loadConfig({
    PROVIDER_BREAKER_MIN_CALLS: '4',
    PROVIDER_BREAKER_FAILURE_RATIO: '0.5',
    PROVIDER_BREAKER_WINDOW_MS: '10000',
    PROVIDER_BREAKER_MIN_CLIENTS: '2',
    PROVIDER_BREAKER_HALF_OPEN_MS: '60000',
    ...env,
  });
  const metrics = new Metrics();
  const sut = new ProviderBreaker(config, metrics);
  /** One whole call for `client`: true succeeds, false fails. */
  const call = (client: string, ok: boolean) => sut.run(client, async () => ok, (result) => !result);
  const calls = async (client: string, ...oks: boolean[]) => {
    for (const ok of oks) await call(client, ok);
  };
  const sample = async (name: string, labels: Record<string, string> = {}) => {
    const values = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
    return values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))?.value ?? 0;
  };
  return { sut, call, calls, sample };
}

describe(ProviderBreaker.name, () => {
  beforeAll(() => Logger.overrideLogger(false));
  beforeEach(() => jest.useFakeTimers({ now: Date.UTC(2026, 0, 1) }));
  afterEach(() => jest.useRealTimers());

  describe('a client’s circuit', () => {
    it('opens once the window holds enough calls and more than the ratio of them failed', async () => {
      const { sut, calls } = setup();
      await calls(A, false, false, false);
      expect(sut.states(A).client).toBe('closed'); // three calls: below the minimum, however bad
      await calls(A, true);
      expect(sut.states(A).client).toBe('closed'); // three failures in four, but a success does not open
      await calls(A, false);
      expect(sut.states(A).client).toBe('open');
    });

    it('stays closed at exactly the ratio', async () => {
      const { sut, calls } = setup();
      await calls(A, true, false, true, false, true, false);
      expect(sut.states(A).client).toBe('closed');
    });

    it('refuses while open, without running the call, and says for how long', async () => {
      const { sut, calls } = setup();
      await calls(A, false, false, false, false);
      jest.advanceTimersByTime(1_000);
      const run = jest.fn(async () => true);
      await expect(sut.run(A, run, () => false)).resolves.toBe('refused');
      expect(run).not.toHaveBeenCalled();
      expect(sut.refusingForMs(A)).toBe(59_000);
      expect(sut.opened(A)).toBe(true);
    });

    it('reopens when the half-open probe fails, and closes when one succeeds', async () => {
      const { sut, call, calls, sample } = setup();
      await calls(A, false, false, false, false);
      jest.advanceTimersByTime(60_000);
      expect(sut.refusingForMs(A)).toBe(0);
      await call(A, false);
      expect(sut.states(A).client).toBe('open');
      expect(sut.refusingForMs(A)).toBe(60_000);

      jest.advanceTimersByTime(60_000);
      let finishProbe!: (ok: boolean) => void;
      const probe = sut.run(A, () => new Promise<boolean>((resolve) => (finishProbe = resolve)), (ok) => !ok);
      expect(sut.states(A).client).toBe('half_open');
      expect(sut.refusingForMs(A)).toBe(1_000); // come back soon: the probe's verdict is near
      expect(sut.opened(A)).toBe(false); // the probe's own retries may go on
      finishProbe(true);
      await probe;
      expect(sut.states(A).client).toBe('closed');
      expect(sut.refusingForMs(A)).toBe(0);
      expect(await sample('provider_breaker_state_changes_total', { scope: 'client', to: 'open' })).toBe(2);
      expect(await sample('provider_breaker_state_changes_total', { scope: 'client', to: 'closed' })).toBe(1);
      expect(await sample('provider_breaker_open_clients')).toBe(0);
    });

    it('lets an error thrown by the call through, without counting it', async () => {
      const { sut } = setup({ PROVIDER_BREAKER_MIN_CALLS: '1' });
      await expect(sut.run(A, () => Promise.reject(new Error('bug')), () => true)).rejects.toThrow('bug');
      expect(sut.states(A).client).toBe('closed');
    });
  });

  describe('one client failing', () => {
    it('opens its own circuit only: other clients’ calls go on', async () => {
      const { sut, call, calls, sample } = setup();
      await calls(A, ...Array<boolean>(40).fill(false));
      expect(sut.states(A)).toEqual({ client: 'open', provider: 'closed' });

      expect(sut.refusingForMs(B)).toBe(0);
      await expect(call(B, true)).resolves.toEqual({ result: true });
      expect(sut.states(B)).toEqual({ client: 'closed', provider: 'closed' });
      expect(await sample('provider_breaker_open_clients')).toBe(1);
      expect(await sample('provider_breaker_state_changes_total', { scope: 'provider', to: 'open' })).toBe(0);
    });

    it('cannot open the provider-wide circuit, even as the only active client', async () => {
      const { sut, calls } = setup({ PROVIDER_BREAKER_MIN_CLIENTS: '2' });
      await calls(A, false, false, false, false);

      expect(sut.refusingForMs(C)).toBe(0);
    });
  });

  describe('the provider-wide circuit', () => {
    it('opens for every client when several clients, more than the ratio of the active ones, are failing', async () => {
      const { sut, call, calls, sample } = setup();
      await calls(C, true);
      await calls(A, false, false, false, false);
      await calls(B, false, false, false, false);

      // A and B are two of the three active clients: C, which never failed, is refused too.
      expect(sut.states(C)).toEqual({ client: 'closed', provider: 'open' });
      expect(sut.refusingForMs(C)).toBe(60_000);
      const run = jest.fn(async () => true);
      await expect(sut.run(C, run, () => false)).resolves.toBe('refused');
      expect(run).not.toHaveBeenCalled();
      expect(sut.refusingForMs(D)).toBe(60_000); // a client never seen before as well
      expect(await sample('provider_breaker_state_changes_total', { scope: 'provider', to: 'open' })).toBe(1);
      await expect(call(A, true)).resolves.toBe('refused');
    });

    it('stays closed while the failing clients are not more than the ratio of the active ones', async () => {
      const { sut, calls } = setup();
      await calls(C, true);
      await calls(D, true);
      await calls(A, false, false, false, false);
      await calls(B, false, false, false, false);

      expect(sut.states(C)).toEqual({ client: 'closed', provider: 'closed' });
      expect(sut.refusingForMs(C)).toBe(0);
    });

    it('closes when the failing clients’ probes are due, and reopens when they fail', async () => {
      const { sut, call, calls, sample } = setup();
      await calls(A, false, false, false, false);
      jest.advanceTimersByTime(1_000);
      await calls(B, false, false, false, false);
      expect(sut.refusingForMs(C)).toBe(59_000); // until A's probe is due: B alone is not enough

      jest.advanceTimersByTime(59_000);
      expect(sut.refusingForMs(C)).toBe(0);
      expect(sut.refusingForMs(A)).toBe(0);
      await call(A, false); // A's probe fails
      expect(sut.refusingForMs(C)).toBe(1_000); // A and B again, until B's probe is due
      expect(await sample('provider_breaker_state_changes_total', { scope: 'provider', to: 'open' })).toBe(2);
      expect(await sample('provider_breaker_state_changes_total', { scope: 'provider', to: 'closed' })).toBe(1);
    });

    it('counts only clients seen lately as active', async () => {
      const { sut, calls } = setup({ PROVIDER_BREAKER_HALF_OPEN_MS: '5000' });
      await calls(C, true);
      await calls(D, true);
      jest.advanceTimersByTime(10_001);
      await calls(A, false, false, false, false);
      await calls(B, false, false, false, false);

      // C and D fell silent more than a window ago: A and B are all the active clients.
      expect(sut.states(A).provider).toBe('open');
    });
  });

  describe('bounds', () => {
    it('keeps at most PROVIDER_TRACKED_CLIENTS circuits, forgetting the least recently seen', async () => {
      const { sut, calls, sample } = setup({ PROVIDER_TRACKED_CLIENTS: '2' });
      await calls(A, false, false, false, false);
      expect(await sample('provider_breaker_open_clients')).toBe(1);

      sut.refusingForMs(B);
      sut.refusingForMs(C);

      expect(await sample('provider_breaker_open_clients')).toBe(0);
      expect(sut.states(A).client).toBe('closed');
    });

    it('starts a client afresh once it has been idle longer than the window and the half-open period', async () => {
      const { sut, calls } = setup({ PROVIDER_BREAKER_HALF_OPEN_MS: '5000' });
      await calls(A, false, false, false);
      jest.advanceTimersByTime(10_001);
      await calls(A, false);

      expect(sut.states(A).client).toBe('closed');
    });
  });
});
