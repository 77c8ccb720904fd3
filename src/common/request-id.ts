import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

const REQUEST_ID = Symbol('requestId');

type WithRequestId = IncomingMessage & { [REQUEST_ID]?: string };

export function newRequestId(): string {
  return `req_${randomUUID()}`;
}

/**
 * This request's id: made on first ask, the same on every later one (the
 * response header, the log line, the 500 envelope, the provider call). Always
 * ours: a client's X-Request-Id would let a caller choose, or reuse, the id
 * under which our logs and the provider file a request. What the client sent
 * is logged beside it (see log-safety.ts).
 */
export function requestIdFor(request: IncomingMessage): string {
  return ((request as WithRequestId)[REQUEST_ID] ??= newRequestId());
}
