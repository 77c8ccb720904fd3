import { Client } from 'pg';

/** How often the bench analyzes its database when the server's autovacuum will not. */
export const ANALYZE_EVERY_MS = 5_000;

/** Its connection's application_name: DatabaseCpu leaves it out, as it leaves out autovacuum's work. */
export const ANALYZER_APPLICATION = 'bench analyzer';

export interface Analyzer {
  /** 'autovacuum' when the server keeps the statistics itself; otherwise the bench's own period, or none (--no-analyze). */
  readonly statistics: 'autovacuum' | `ANALYZE every ${number} s` | 'none (--no-analyze)';
  stop(): Promise<void>;
}

/**
 * Keeps the planner's statistics current while the bench's tables grow, as
 * autovacuum's analyze does on a production server.
 *
 * The bench's database starts empty and grows by hundreds of payments a
 * second. Each connection caches plans (the status-event trigger's query in
 * PL/pgSQL, the foreign keys' checks), and a cached plan is made again only
 * when something invalidates it, such as an ANALYZE of its table. On a server
 * run with autovacuum off (the shared Postgres of the development machine
 * and CI is), nothing does: plans made while the tables were empty stay, and
 * a create's cost in Postgres grew with the rows, from 420 creates/s to 220
 * within one minute of a soak and under 100 within five. With this analyzer
 * the same minute held 615. Autovacuum on is a requirement of the service
 * (README, Operations); this stands in for it and changes nothing where it runs.
 * With `analyze` false (--no-analyze) it stays out, to see what stale
 * statistics cost.
 */
export async function keepStatisticsCurrent(databaseUrl: string, analyze: boolean): Promise<Analyzer> {
  const client = new Client({ connectionString: databaseUrl, application_name: ANALYZER_APPLICATION });
  const report = (error: unknown) =>
    process.stderr.write(`bench: the analyzer's connection failed: ${error instanceof Error ? error.message : String(error)}\n`);
  // A connection the server ends between two runs is reported, not the bench's crash.
  client.on('error', report);
  await client.connect();
  const { rows } = await client.query<{ autovacuum: string }>('SHOW autovacuum');
  const serverAnalyzes = rows[0].autovacuum === 'on';
  if (serverAnalyzes || !analyze) {
    await client.end();
    return { statistics: serverAnalyzes ? 'autovacuum' : 'none (--no-analyze)', stop: async () => undefined };
  }
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = running
      .then(() => client.query('ANALYZE'))
      .catch(report);
  }, ANALYZE_EVERY_MS);
  return {
    statistics: `ANALYZE every ${ANALYZE_EVERY_MS / 1000} s`,
    stop: async () => {
      clearInterval(timer);
      await running;
      await client.end();
    },
  };
}
