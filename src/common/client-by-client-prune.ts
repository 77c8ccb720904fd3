/** Deletes one batch of one client's rows; how many it deleted. */
export type PruneBatch = (clientId: string) => Promise<number>;

/** What one run did: the rows each step deleted, and the clients it left unfinished (the one it stopped at first). */
export interface PruneRun<S extends string> {
  pruned: Record<S, number>;
  unfinished: string[];
}

/** A backlog is counted up to this many rows: past it, the figure only says "far behind". */
export const PRUNE_BACKLOG_COUNT_CAP = 1_000_000;

/**
 * The worker's prunes (expired keys, old events, old processed messages):
 * client by client, so on a schema sharded by client every statement runs on
 * one shard; for each client, every step batch after batch while its batches
 * come back full, until the run's time budget is spent. So a prune keeps up
 * with any sustained rate the database can take, and a batch, being one short
 * statement, never holds its locks for long. A run that stops on its budget
 * remembers the client it stopped at, and the next run starts there, so no
 * client waits for ever behind a big one.
 */
export class ClientByClientPrune<S extends string> {
  private resumesAt: string | undefined;

  constructor(
    private readonly steps: Record<S, PruneBatch>,
    private readonly batchSize: number,
  ) {}

  async run(clientIds: string[], budgetMs: number): Promise<PruneRun<S>> {
    const deadline = Date.now() + budgetMs;
    const names = Object.keys(this.steps) as S[];
    const pruned = Object.fromEntries(names.map((name) => [name, 0])) as Record<S, number>;
    const clients = startingAt(clientIds, this.resumesAt);
    let unfinished: string[] = [];
    for (const [index, clientId] of clients.entries()) {
      let full = names;
      while (full.length > 0 && Date.now() < deadline) {
        const again: S[] = [];
        for (const name of full) {
          const deleted = await this.steps[name](clientId);
          pruned[name] += deleted;
          if (deleted >= this.batchSize) again.push(name);
        }
        full = again;
      }
      if (full.length > 0) {
        unfinished = clients.slice(index);
        break;
      }
    }
    this.resumesAt = unfinished[0];
    return { pruned, unfinished };
  }
}

/**
 * What the clients a run left unfinished still hold, counted client by client
 * up to PRUNE_BACKLOG_COUNT_CAP in all, so a huge backlog costs no more; 0
 * without a statement when the run finished.
 */
export async function countBacklog(unfinished: string[], count: (clientId: string, cap: number) => Promise<number>): Promise<number> {
  let backlog = 0;
  for (const clientId of unfinished) {
    backlog += await count(clientId, PRUNE_BACKLOG_COUNT_CAP - backlog);
    if (backlog >= PRUNE_BACKLOG_COUNT_CAP) break;
  }
  return backlog;
}

/** The clients (in id order) from `first` on, then those before it: where a prune run begins. */
function startingAt(ids: string[], first: string | undefined): string[] {
  const start = first === undefined ? 0 : ids.findIndex((id) => id >= first);
  return start <= 0 ? ids : [...ids.slice(start), ...ids.slice(0, start)];
}
