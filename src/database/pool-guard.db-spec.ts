import { type Server, type Socket, connect, createServer } from 'node:net';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { TEST_DATABASE_URL } from '../../test/support/test-env';
import { fromInfrastructureError } from '../common/error-envelope';
import { TransportErrorCode } from '../common/transport-error';
import { createDataSource } from './data-source';
import { guardPoolConnections } from './pool-guard';

/** The backend messages of `bytes`, as far as they are complete: type byte, then an int32 length that counts itself. */
function messages(bytes: Buffer): { type: string; body: Buffer }[] {
  const found: { type: string; body: Buffer }[] = [];
  for (let at = 0; at + 5 <= bytes.length; ) {
    const length = bytes.readInt32BE(at + 1);
    if (at + 1 + length > bytes.length) break;
    found.push({ type: String.fromCharCode(bytes[at]), body: bytes.subarray(at + 5, at + 1 + length) });
    at += 1 + length;
  }
  return found;
}

/**
 * A TCP proxy in front of the test server. Once armed, the next connection
 * through it is terminated (pg_terminate_backend) as soon as its handshake
 * completes, and the client receives the end of the handshake and the
 * server's FATAL in one write: what a busy process reads when the server
 * shuts down just as a connection opens.
 */
async function startTerminatingProxy(target: URL, admin: Client) {
  let armed = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    downstream.pipe(upstream);
    upstream.on('end', () => downstream.end());
    downstream.on('end', () => upstream.end());
    if (!armed) {
      upstream.pipe(downstream, { end: false });
      return;
    }
    armed = false;
    let held = Buffer.alloc(0);
    let terminating = false;
    const hold = (chunk: Buffer) => {
      held = Buffer.concat([held, chunk]);
      const seen = messages(held);
      const backend = seen.find((message) => message.type === 'K');
      if (!terminating && backend && seen.some((message) => message.type === 'Z')) {
        terminating = true;
        void admin.query('SELECT pg_terminate_backend($1)', [backend.body.readInt32BE(0)]);
      }
      if (seen.some((message) => message.type === 'E')) {
        upstream.off('data', hold);
        downstream.write(held);
      }
    };
    upstream.on('data', hold);
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const port = (server.address() as { port: number }).port;
  return {
    url: Object.assign(new URL(target.toString()), { host: `127.0.0.1:${port}` }).toString(),
    arm: () => (armed = true),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((closed) => server.close(closed));
    },
  };
}

describe('guardPoolConnections', () => {
  let admin: Client;
  let proxy: Awaited<ReturnType<typeof startTerminatingProxy>>;
  let dataSource: DataSource;

  beforeAll(async () => {
    admin = new Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    proxy = await startTerminatingProxy(new URL(TEST_DATABASE_URL), admin);
    dataSource = guardPoolConnections(await createDataSource({ databaseUrl: proxy.url }).initialize());
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await proxy?.close();
    await admin?.end();
  });

  it('keeps the process up when a new connection is terminated in the read that completed its handshake: its query answers 503', async () => {
    proxy.arm();
    // Two at once: the pool's one idle connection takes the first, a new one the second.
    const [first, second] = await Promise.allSettled([dataSource.query('SELECT pg_sleep(0.2)'), dataSource.query('SELECT 1')]);

    expect(first.status).toBe('fulfilled');
    expect(second.status).toBe('rejected');
    const refused = fromInfrastructureError((second as PromiseRejectedResult).reason);
    expect(refused?.code).toBe(TransportErrorCode.ServiceUnavailable);
    // The pool dropped the dead connection: the next queries get a sound one.
    await expect(Promise.all([dataSource.query('SELECT 1 AS one'), dataSource.query('SELECT 1 AS one')])).resolves.toEqual([
      [{ one: 1 }],
      [{ one: 1 }],
    ]);
  });
});
