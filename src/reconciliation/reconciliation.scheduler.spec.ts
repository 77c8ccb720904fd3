import { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { loadConfig } from '../config/app-config';
import { JobName } from './reconciliation.constants';
import { ReconciliationScheduler } from './reconciliation.scheduler';

const INTERVAL_MS = 1_000;

function setup() {
  const schedulers = new Set<string>();
  const queue = {
    upsertJobScheduler: jest.fn(async (id: string) => {
      schedulers.add(id);
      return undefined;
    }),
    getJobScheduler: jest.fn(async (id: string) => (schedulers.has(id) ? { key: id } : undefined)),
  };
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const sut = new ReconciliationScheduler(
    queue as unknown as Queue,
    loadConfig({ RECONCILE_INTERVAL_MS: String(INTERVAL_MS), KEY_PRUNE_INTERVAL_MS: '60000' }),
  );
  /** One tick of the watch, and whatever it awaits. */
  const tick = async () => {
    await jest.advanceTimersByTimeAsync(INTERVAL_MS);
  };
  return { sut, queue, schedulers, warn, tick };
}

describe('ReconciliationScheduler', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('upserts the sweep and the prune schedulers at start', async () => {
    const { sut, queue } = setup();
    await sut.onApplicationBootstrap();

    expect(queue.upsertJobScheduler.mock.calls).toEqual([
      ['reconcile-sweep', { every: INTERVAL_MS }, { name: JobName.Sweep, opts: expect.any(Object) }],
      ['prune-idempotency-keys', { every: 60_000 }, { name: JobName.PruneKeys, opts: expect.any(Object) }],
    ]);
    sut.onApplicationShutdown();
  });

  it('leaves live schedulers alone', async () => {
    const { sut, queue, tick } = setup();
    await sut.onApplicationBootstrap();
    queue.upsertJobScheduler.mockClear();

    await tick();
    await tick();

    expect(queue.getJobScheduler).toHaveBeenCalledTimes(4);
    expect(queue.upsertJobScheduler).not.toHaveBeenCalled();
    sut.onApplicationShutdown();
  });

  it('re-creates the schedulers within one interval of Redis losing them', async () => {
    const { sut, queue, schedulers, warn, tick } = setup();
    await sut.onApplicationBootstrap();
    queue.upsertJobScheduler.mockClear();

    schedulers.clear();
    await tick();

    expect(queue.upsertJobScheduler).toHaveBeenCalledTimes(2);
    expect([...schedulers].sort()).toEqual(['prune-idempotency-keys', 'reconcile-sweep']);
    expect(warn).toHaveBeenCalledWith({ msg: 'job schedulers were missing from Redis: re-created' });
    sut.onApplicationShutdown();
  });

  it('logs a check that fails, and checks again at the next interval', async () => {
    const { sut, queue, schedulers, warn, tick } = setup();
    await sut.onApplicationBootstrap();
    schedulers.clear();
    queue.getJobScheduler.mockRejectedValueOnce(new Error('Connection is closed.'));

    await tick();
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ msg: 'could not check the job schedulers; will retry' }));
    expect(schedulers.size).toBe(0);

    await tick();
    expect(schedulers.size).toBe(2);
    sut.onApplicationShutdown();
  });

  it('stops checking at shutdown', async () => {
    const { sut, queue, tick } = setup();
    await sut.onApplicationBootstrap();
    sut.onApplicationShutdown();

    await tick();

    expect(queue.getJobScheduler).not.toHaveBeenCalled();
  });
});
