import type { Pool, PoolClient } from 'pg';

/** A connection taken from the pool and held until released. */
export interface HeldConnection {
  readonly connection: PoolClient;
  /**
   * Gives it back to the pool, or closes it when `broken` (a failure that
   * ended its session: see endsSession). Only the first call acts, so a
   * timeout may close it while the work on it is still under way.
   */
  release(broken?: Error): void;
}

/**
 * Takes a connection of `pool` without pool.query, which discards the
 * connection after any failed statement, a unique violation included. While
 * it is held, the pool no longer listens for its errors: one the server
 * sends meanwhile (a shutdown's FATAL, a dropped socket) fails what runs on
 * it, and must not end the process as an unhandled 'error' event. TypeORM
 * listens the same way for a connection it holds.
 */
export async function holdConnection(pool: Pool): Promise<HeldConnection> {
  const connection = await pool.connect();
  connection.on('error', ignoreHeldConnectionError);
  let released = false;
  return {
    connection,
    release(broken?: Error) {
      if (released) return;
      released = true;
      connection.off('error', ignoreHeldConnectionError);
      connection.release(broken);
    },
  };
}

/**
 * Whether `error` ended the connection's session: a FATAL from the server
 * (it is shutting down, or terminated this backend) or a dropped socket,
 * anything but an ERROR of the statement. Only such a connection is closed.
 */
export function endsSession(error: unknown): boolean {
  return (error as { severity?: unknown }).severity !== 'ERROR';
}

/** What runs on the connection fails with the same error, and is answered from that. */
function ignoreHeldConnectionError(): void {}
