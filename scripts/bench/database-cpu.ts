import { existsSync } from 'node:fs';
import type { DataSource } from 'typeorm';
import { ANALYZER_APPLICATION } from './analyzer';
import { cpuMs } from './process-cpu';

/** CPU in ms per Postgres backend process, by pid. */
export type BackendCpu = ReadonlyMap<number, number>;

/**
 * The CPU Postgres spends on one database: the backends serving it, read from
 * /proc, so only when the server runs on this machine. The bench's database is
 * its own, so its backends serve only the bench's processes (the API under
 * load, and the backlog's worker), whoever else shares the server. Not
 * counted: the server's shared work (WAL writer, checkpointer, autovacuum, and
 * the bench's ANALYZE standing in for autovacuum's), and a backend that exits
 * mid-load (the pools keep theirs open).
 */
export class DatabaseCpu {
  constructor(
    private readonly dataSource: DataSource,
    private readonly database: string,
  ) {}

  /** Undefined when the backends are not on this machine. */
  async sample(): Promise<BackendCpu | undefined> {
    const rows = (await this.dataSource.query(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = $1 AND backend_type = 'client backend' AND application_name <> $2`,
      [this.database, ANALYZER_APPLICATION],
    )) as { pid: number }[];
    if (!rows.every(({ pid }) => existsSync(`/proc/${pid}/stat`))) return undefined;
    const sample = new Map<number, number>();
    for (const { pid } of rows) {
      try {
        sample.set(pid, cpuMs(pid));
      } catch {
        // Exited between the query and the read: its CPU is lost either way.
      }
    }
    return sample;
  }
}
