import { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { DataSource } from 'typeorm';
import { Metrics } from '../metrics/metrics';
import { DELIVERIES_SQL, PAYMENTS_SQL, REFUNDS_SQL, SafetyNetGauges } from './safety-net-gauges';

const INTERVAL_MS = 15_000;

function setup() {
  const rows = {
    payments: { pending: 3, requires_review: 2, oldest_pending_age_seconds: 42.5 },
    refunds: { pending: 4, requires_review: 1 },
    deliveries: { pending: 7, oldest_pending_age_seconds: 9 },
  };
  const query = jest.fn(async (sql: string): Promise<unknown[]> => {
    if (sql === PAYMENTS_SQL) return [rows.payments];
    if (sql === REFUNDS_SQL) return [rows.refunds];
    if (sql === DELIVERIES_SQL) return [rows.deliveries];
    throw new Error(`unexpected statement ${sql}`);
  });
  const dataSource = { manager: { query } } as unknown as DataSource;
  const queue = (name: string, counts: Record<string, number>) =>
    ({ name, getJobCounts: jest.fn(async () => counts) }) as unknown as Queue & { getJobCounts: jest.Mock };
  const reconciliation = queue('reconciliation', { waiting: 4, active: 1, delayed: 2, failed: 0, prioritized: 0 });
  const webhooks = queue('webhooks', { waiting: 0, active: 0, delayed: 5, failed: 1 });
  const metrics = new Metrics();
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const sut = new SafetyNetGauges(dataSource, [reconciliation, webhooks], metrics, INTERVAL_MS);
  const value = async (name: string, labels: Record<string, string> = {}) => {
    const { values } = await metrics.registry.getSingleMetric(name)!.get();
    return values.find((sample) => Object.entries(labels).every(([label, v]) => sample.labels[label] === v))?.value;
  };
  return { sut, rows, query, reconciliation, webhooks, metrics, warn, value };
}

describe('SafetyNetGauges', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('sets every gauge from the three statements and the queues’ job counts', async () => {
    const { sut, value } = setup();

    await sut.tick();

    expect(await value('payments_pending')).toBe(3);
    expect(await value('payments_requires_review')).toBe(2);
    expect(await value('payments_oldest_pending_age_seconds')).toBe(42.5);
    expect(await value('refunds_pending')).toBe(4);
    expect(await value('refunds_requires_review')).toBe(1);
    expect(await value('webhook_deliveries_pending')).toBe(7);
    expect(await value('webhook_oldest_pending_age_seconds')).toBe(9);
    expect(await value('queue_jobs', { queue: 'reconciliation', state: 'waiting' })).toBe(4);
    expect(await value('queue_jobs', { queue: 'reconciliation', state: 'delayed' })).toBe(2);
    expect(await value('queue_jobs', { queue: 'webhooks', state: 'failed' })).toBe(1);
    // A state the queue's Redis does not report (no prioritized jobs there) is 0, not missing.
    expect(await value('queue_jobs', { queue: 'webhooks', state: 'prioritized' })).toBe(0);
  });

  it('asks each queue for the states it reports, once per refresh', async () => {
    const { sut, reconciliation } = setup();

    await sut.tick();

    expect(reconciliation.getJobCounts).toHaveBeenCalledTimes(1);
    expect(reconciliation.getJobCounts).toHaveBeenCalledWith('waiting', 'active', 'delayed', 'failed', 'prioritized');
  });

  it('refreshes at start and then once per interval', async () => {
    const { sut, query, rows, value } = setup();
    sut.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(0);
    expect(query).toHaveBeenCalledTimes(3);

    rows.payments = { pending: 0, requires_review: 1, oldest_pending_age_seconds: 0 };
    await jest.advanceTimersByTimeAsync(INTERVAL_MS);

    expect(query).toHaveBeenCalledTimes(6);
    expect(await value('payments_pending')).toBe(0);
    expect(await value('payments_requires_review')).toBe(1);
    await sut.onModuleDestroy();
  });

  it('runs one refresh at a time: a tick while one is under way starts none', async () => {
    const { sut, query } = setup();
    let release!: () => void;
    query.mockImplementationOnce(() => new Promise((resolve) => (release = () => resolve([{ pending: 0, requires_review: 0, oldest_pending_age_seconds: 0 }]))));

    const first = sut.tick();
    const second = sut.tick();
    release();
    await Promise.all([first, second]);

    expect(query).toHaveBeenCalledTimes(3);
  });

  it('keeps the last values and logs when a refresh fails, and recovers at the next', async () => {
    const { sut, query, rows, value, warn } = setup();
    await sut.tick();
    query.mockRejectedValueOnce(new Error('Connection terminated'));
    rows.payments = { pending: 9, requires_review: 0, oldest_pending_age_seconds: 1 };

    await sut.tick();
    expect(await value('payments_pending')).toBe(3);
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ msg: 'could not refresh the gauges; will retry' }));

    await sut.tick();
    expect(await value('payments_pending')).toBe(9);
  });

  it('stops at shutdown: the timer is cleared and the refresh under way awaited', async () => {
    const { sut, query } = setup();
    sut.onApplicationBootstrap();
    const stopped = sut.onModuleDestroy();
    await stopped;
    const asked = query.mock.calls.length;

    await jest.advanceTimersByTimeAsync(3 * INTERVAL_MS);

    expect(query.mock.calls.length).toBe(asked);
    expect(jest.getTimerCount()).toBe(0);
  });
});
