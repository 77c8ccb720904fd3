import type { IncomingMessage } from 'node:http';

const RAW_BODY = Symbol('rawBody');

type WithRawBody = IncomingMessage & { [RAW_BODY]?: Buffer };

/**
 * The JSON body parser's `verify` hook, run before it parses: refuses a
 * charset other than UTF-8 (RFC 8259 8.1: JSON between systems is UTF-8, and
 * the duplicate-key pass reads UTF-8), and keeps the bytes as received, which
 * two readers need: the duplicate-key pass (json-body.ts) and the provider
 * events' signature, computed over the exact bytes.
 */
export function keepRawBody(request: IncomingMessage, _response: unknown, body: Buffer, charset: string): void {
  if (charset !== 'utf-8') {
    throw Object.assign(new Error(`unsupported charset "${charset}"`), { status: 415, type: 'charset.unsupported' });
  }
  (request as WithRawBody)[RAW_BODY] = body;
}

export function rawBodyOf(request: IncomingMessage): Buffer | undefined {
  return (request as WithRawBody)[RAW_BODY];
}
