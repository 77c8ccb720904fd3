import type { Pool, PoolClient } from 'pg';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';

/**
 * Gives every connection the pool opens an 'error' listener for its whole
 * life. pg-pool hands a new connection over while it parses the read that
 * completed the handshake, and TypeORM attaches its own listener only a
 * microtask later. When that same read also holds a FATAL (a server shutting
 * down terminates every backend: 57P01), the connection emits 'error' with no
 * listener, and Node ends the process. Nothing is lost by listening: the
 * connection is marked unusable, the query sent on it fails (503), and the
 * pool discards it on release.
 *
 * Attached once the data source is initialized: the one connection opened
 * during initialization is never handed over by that path again.
 */
export function guardPoolConnections(dataSource: DataSource): DataSource {
  const pool = (dataSource.driver as PostgresDriver).master as Pool;
  pool.on('connect', (connection: PoolClient) => connection.on('error', () => undefined));
  return dataSource;
}
