import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import pino from 'pino';
import { pinoHttp } from 'pino-http';
import { requestLogOptions } from './logging';

/** The request log line a server with the service's options writes for one request `handle` answers. */
async function logLineFor(handle: (request: IncomingMessage, response: ServerResponse) => void): Promise<Record<string, unknown>> {
  const lines = new PassThrough();
  const middleware = pinoHttp({ ...requestLogOptions(), logger: pino(lines) });
  const server = createServer((request, response) => {
    middleware(request, response);
    handle(request, response);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const line = once(lines, 'data');
    await (await fetch(`http://127.0.0.1:${port}/v1/payments`)).text();
    const [chunk] = (await line) as [Buffer];
    return JSON.parse(chunk.toString('utf8')) as Record<string, unknown>;
  } finally {
    server.close();
  }
}

describe('the request log line', () => {
  it('logs a 500 with its error class and message, and no stack', async () => {
    const line = await logLineFor((_request, response) => {
      (response as ServerResponse & { err?: Error }).err = new TypeError('boom for sk_live_abcdefghijkl');
      response.statusCode = 500;
      response.end();
    });

    expect(line).toMatchObject({ level: 50, err: { type: 'TypeError', message: 'boom for [redacted]' } });
    expect(JSON.stringify(line)).not.toMatch(/stack|node_modules|at .+\.js:\d+/);
  });

  it('logs a 5xx that carries no error without a stack too', async () => {
    const line = await logLineFor((_request, response) => {
      response.statusCode = 503;
      response.end();
    });

    expect(line).toMatchObject({ level: 50, res: { statusCode: 503 } });
    expect(JSON.stringify(line)).not.toMatch(/stack|node_modules/);
  });
});
