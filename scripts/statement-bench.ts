import 'reflect-metadata';
import { createDataSource } from '../src/database/data-source';
import { queryRows } from '../src/database/sql';

/**
 * `node dist/scripts/statement-bench.js`: the CPU this process spends per
 * statement outside a transaction, sent through TypeORM's
 * `EntityManager.query` and through `queryRows` (the data source's pool
 * directly), 16 at a time, on the server of DATABASE_URL (default: the local
 * one's `postgres` database). Read-only (`SELECT $1::int`), it creates
 * nothing. Prints one JSON line: medians over 5 rounds of 4,000 statements,
 * in ms of CPU per statement, the two sides alternating.
 */
const ROUNDS = 5;
const STATEMENTS = 4_000;
const CONCURRENCY = 16;

async function cpuMsPerStatement(send: () => Promise<unknown>): Promise<number> {
  let left = STATEMENTS;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await send();
    }),
  );
  const { user, system } = process.cpuUsage(before);
  return (user + system) / 1000 / STATEMENTS;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main(): Promise<void> {
  if (process.argv.includes('--help')) {
    process.stdout.write('Usage: node dist/scripts/statement-bench.js (DATABASE_URL: the server to ask)\n');
    return;
  }
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dataSource = await createDataSource({ databaseUrl }).initialize();
  try {
    const sides = {
      typeorm: () => dataSource.manager.query('SELECT $1::int', [1]),
      query_rows: () => queryRows(dataSource.manager, 'SELECT $1::int', [1]),
    };
    const figures: Record<keyof typeof sides, number[]> = { typeorm: [], query_rows: [] };
    for (const send of Object.values(sides)) await cpuMsPerStatement(send);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, send] of Object.entries(sides) as [keyof typeof sides, () => Promise<unknown>][]) {
        figures[name].push(await cpuMsPerStatement(send));
      }
    }
    const typeorm = median(figures.typeorm);
    const queryRowsMs = median(figures.query_rows);
    const round3 = (value: number) => Math.round(value * 1000) / 1000;
    process.stdout.write(
      `${JSON.stringify({ cpu_ms_per_statement: { typeorm: round3(typeorm), query_rows: round3(queryRowsMs) }, ratio: round3(queryRowsMs / typeorm), concurrency: CONCURRENCY, statements: STATEMENTS, rounds: ROUNDS })}\n`,
    );
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`statement-bench: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
