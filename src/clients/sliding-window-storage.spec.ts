import { type ThrottlerStorage, ThrottlerStorageService } from '@nestjs/throttler';
import { SlidingWindowStorage } from './sliding-window-storage';

const TTL = 10_000;

type Record = { totalHits: number; timeToExpire: number; isBlocked: boolean; timeToBlockExpire: number };

/** What the rate limit reads of a record: the block's remaining time only matters while blocked. */
function readOf({ totalHits, timeToExpire, isBlocked, timeToBlockExpire }: Record) {
  return { totalHits, timeToExpire, isBlocked, ...(isBlocked && { timeToBlockExpire }) };
}

const answer = (storage: SlidingWindowStorage, key: string, limit: number) => readOf(storage.hit(key, TTL, limit, TTL));
const stockAnswer = async (storage: ThrottlerStorage, key: string, limit: number) =>
  readOf(await storage.increment(key, TTL, limit, TTL, 'default'));

describe('SlidingWindowStorage', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('answers as @nestjs/throttler’s own storage does, through windows, blocks and their ends', async () => {
    const ours = new SlidingWindowStorage();
    const stock = new ThrottlerStorageService();
    // Steps of 0 to 2.9 s, bursts included: hits leave the window one by one,
    // the limit is crossed, the block runs out and counting starts afresh.
    const steps = [0, 0, 100, 2_900, 0, 1_500, 700, 0, 0, 4_000, 2_500, 300, 0, 2_800, 2_900, 2_900, 2_900, 1, 0, 0];
    try {
      for (let round = 0; round < 4; round++) {
        for (const step of steps) {
          jest.advanceTimersByTime(step + round * 300);
          for (const key of ['a', 'b']) {
            expect(answer(ours, key, key === 'a' ? 3 : 5)).toEqual(await stockAnswer(stock, key, key === 'a' ? 3 : 5));
          }
        }
      }
    } finally {
      ours.stop();
      stock.onApplicationShutdown();
    }
  });

  it('blocks past the limit for blockDuration, then counts afresh', () => {
    const storage = new SlidingWindowStorage();
    try {
      for (let hit = 1; hit <= 2; hit++) expect(answer(storage, 'a', 2)).toMatchObject({ totalHits: hit, isBlocked: false });
      expect(answer(storage, 'a', 2)).toMatchObject({ totalHits: 3, isBlocked: true, timeToBlockExpire: 10 });

      jest.advanceTimersByTime(4_000);
      expect(answer(storage, 'a', 2)).toMatchObject({ isBlocked: true, timeToBlockExpire: 6 });
      jest.advanceTimersByTime(6_000);
      expect(answer(storage, 'a', 2)).toMatchObject({ totalHits: 1, isBlocked: false });
    } finally {
      storage.stop();
    }
  });
});
