import { setTimeout as delay } from 'node:timers/promises';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/database/data-source';
import { ensureDatabase } from '../../src/database/ensure-database';
import { migrate } from '../../src/database/migrate';
import { TABLES } from './tables';

/**
 * Databases of the tests and the scripts' own (bench, chaos, settle-latency):
 * on the server of DATABASE_URL, under a name of their own, emptied before use.
 */

/** `baseUrl` with its database name replaced by `name`. */
export function databaseUrlNamed(baseUrl: string, name: string): string {
  return Object.assign(new URL(baseUrl), { pathname: `/${name}` }).toString();
}

/** Drops the database `name` on the server of `baseUrl`, if it is there (connections to it are ended). */
export async function dropDatabase(baseUrl: string, name: string): Promise<void> {
  const admin = new Client({ connectionString: databaseUrlNamed(baseUrl, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name.replaceAll('"', '""')}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/**
 * Creates the database if missing and brings its schema up to date, leaving
 * its rows alone; `created` says whether this call made it.
 */
export async function openMigratedDatabase(databaseUrl: string): Promise<{ dataSource: DataSource; created: boolean }> {
  const created = await ensureDatabase(databaseUrl);
  const dataSource = await createDataSource({ databaseUrl }).initialize();
  try {
    await migrate(dataSource);
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  return { dataSource, created };
}

/** Creates the database if missing, brings its schema up to date and empties it. */
export async function openScratchDatabase(databaseUrl: string): Promise<DataSource> {
  const { dataSource } = await openMigratedDatabase(databaseUrl);
  try {
    await emptyTables(dataSource);
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  return dataSource;
}

/** Empties every table the migrations create: the list comes from the table definitions, so none is forgotten. */
export async function emptyTables(dataSource: DataSource): Promise<void> {
  await dataSource.query(`TRUNCATE ${TABLES.map((table) => table.name).join(', ')} CASCADE`);
}

/** Polls until no payment is pending or the deadline passes; the number still pending. */
export async function waitUntilNonePending(dataSource: DataSource, deadlineMs: number, intervalMs = 100): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const [{ n }] = (await dataSource.query(`SELECT count(*)::int AS n FROM payments WHERE status = 'pending'`)) as {
      n: number;
    }[];
    if (n === 0 || Date.now() >= deadline) return n;
    await delay(intervalMs);
  }
}
