import { eventually } from '../../test/support/eventually';
import { loadConfig } from '../config/app-config';
import { AnswerCache } from './answer-cache';

const ANSWER = { fingerprint: 'f'.repeat(64), response: { status: 201, body: '{"id":"pay_1"}' } };

describe('AnswerCache', () => {
  it('keeps an answer per client and key', () => {
    const sut = new AnswerCache(loadConfig({}));

    sut.remember('client_1', 'k', ANSWER, 60_000, performance.now());

    expect(sut.get('client_1', 'k')).toEqual(ANSWER);
    expect(sut.get('client_2', 'k')).toBeUndefined();
    expect(sut.get('client_1', 'other')).toBeUndefined();
  });

  it('lets an answer go when its key expires, counted from before the statement that told its retention', async () => {
    const sut = new AnswerCache(loadConfig({}));

    sut.remember('client_1', 'k', ANSWER, 150, performance.now() - 100);

    expect(sut.get('client_1', 'k')).toEqual(ANSWER);
    await eventually(() => (sut.get('client_1', 'k') === undefined ? true : undefined), { timeoutMs: 2_000, intervalMs: 5 });
  });

  it('keeps nothing whose retention had run out by the time it is told, nor anything when turned off', () => {
    const cache = new AnswerCache(loadConfig({}));
    const off = new AnswerCache(loadConfig({ REPLAY_CACHE_ENTRIES: '0' }));

    cache.remember('client_1', 'k', ANSWER, 50, performance.now() - 60);
    off.remember('client_1', 'k', ANSWER, 60_000, performance.now());

    expect(cache.get('client_1', 'k')).toBeUndefined();
    expect(off.get('client_1', 'k')).toBeUndefined();
  });

  it('holds at most REPLAY_CACHE_ENTRIES answers, forgetting the least recently used', () => {
    const sut = new AnswerCache(loadConfig({ REPLAY_CACHE_ENTRIES: '2' }));
    const now = performance.now();
    sut.remember('c', 'a', ANSWER, 60_000, now);
    sut.remember('c', 'b', ANSWER, 60_000, now);
    sut.get('c', 'a');

    sut.remember('c', 'c', ANSWER, 60_000, now);

    expect([sut.get('c', 'a'), sut.get('c', 'b'), sut.get('c', 'c')]).toEqual([ANSWER, undefined, ANSWER]);
  });
});
