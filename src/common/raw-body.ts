import type { IncomingMessage } from 'node:http';

/** Routes whose handlers need the body exactly as received (a signature is computed over its bytes). */
const RAW_BODY_PATHS = new Set(['/v1/provider/events']);

const RAW_BODY = Symbol('rawBody');

type WithRawBody = IncomingMessage & { [RAW_BODY]?: Buffer };

/** The body parser's `verify` hook: keeps the bytes of the routes that need them, and only those. */
export function keepRawBody(request: IncomingMessage, _response: unknown, body: Buffer): void {
  const path = (request.url ?? '').split('?')[0];
  if (RAW_BODY_PATHS.has(path)) (request as WithRawBody)[RAW_BODY] = body;
}

export function rawBodyOf(request: IncomingMessage): Buffer | undefined {
  return (request as WithRawBody)[RAW_BODY];
}
