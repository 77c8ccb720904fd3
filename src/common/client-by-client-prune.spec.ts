import { ClientByClientPrune, PRUNE_BACKLOG_COUNT_CAP, countBacklog } from './client-by-client-prune';

describe('ClientByClientPrune', () => {
  const BATCH = 10;
  afterEach(() => jest.restoreAllMocks());

  /** A step that deletes full batches of a client `full[client]` times, then a part batch, then nothing. */
  function step(full: Record<string, number>, calls: string[], name: string) {
    const left = { ...full };
    const done = new Set<string>();
    return jest.fn(async (clientId: string) => {
      calls.push(`${name}:${clientId}`);
      if ((left[clientId] ?? 0) > 0) {
        left[clientId]--;
        return BATCH;
      }
      if (done.has(clientId)) return 0;
      done.add(clientId);
      return 3;
    });
  }

  it('takes each client in turn, and of each client every step again only while its batches come back full', async () => {
    const calls: string[] = [];
    const sut = new ClientByClientPrune(
      { events: step({ a: 2 }, calls, 'events'), messages: step({ b: 1 }, calls, 'messages') },
      BATCH,
    );

    const run = await sut.run(['a', 'b'], 60_000);

    expect(run).toEqual({ pruned: { events: 2 * BATCH + 3 + 3, messages: 3 + BATCH + 3 }, unfinished: [] });
    expect(calls).toEqual([
      'events:a', 'messages:a', 'events:a', 'events:a',
      'events:b', 'messages:b', 'messages:b',
    ]);
  });

  it('stops on its budget, says which clients it left, and starts the next run with the one it stopped at', async () => {
    let now = 0;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    const calls: string[] = [];
    const full = jest.fn(async (clientId: string) => {
      calls.push(clientId);
      now += 400;
      return clientId === 'a' ? 0 : BATCH;
    });
    const sut = new ClientByClientPrune({ rows: full }, BATCH);

    const first = await sut.run(['a', 'b', 'c'], 1_000);
    expect(first).toEqual({ pruned: { rows: 2 * BATCH }, unfinished: ['b', 'c'] });
    expect(calls).toEqual(['a', 'b', 'b']);

    calls.length = 0;
    const second = await sut.run(['a', 'b', 'c'], 1_000);
    expect(second.unfinished).toEqual(['b', 'c', 'a']);
    expect(calls).toEqual(['b', 'b', 'b']);
  });
});

describe('countBacklog', () => {
  it('counts nothing when the run finished, and stops counting at the cap', async () => {
    const count = jest.fn(async (_clientId: string, cap: number) => Math.min(cap, 600_000));

    expect(await countBacklog([], count)).toBe(0);
    expect(count).not.toHaveBeenCalled();
    expect(await countBacklog(['a', 'b', 'c'], count)).toBe(PRUNE_BACKLOG_COUNT_CAP);
    expect(count.mock.calls).toEqual([
      ['a', PRUNE_BACKLOG_COUNT_CAP],
      ['b', PRUNE_BACKLOG_COUNT_CAP - 600_000],
    ]);
  });
});
