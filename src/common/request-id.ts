import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';
const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's own request id is kept when it is sane, so logs join up across services. */
function requestIdFor(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === 'string' && ACCEPTABLE.test(given) ? given : `req_${randomUUID()}`;
}

/**
 * Gives the request its id, once, as the first thing the API does with it:
 * every answer carries it (refusals before routing included) and pino-http
 * logs under it (see common/logging.ts).
 */
export function assignRequestId(request: IncomingMessage & { id?: unknown }, response: ServerResponse): string {
  if (typeof request.id === 'string') return request.id;
  const id = requestIdFor(request);
  request.id = id;
  response.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** The id assignRequestId gave this request. */
export function requestIdOf(request: IncomingMessage & { id?: unknown }): string {
  return typeof request.id === 'string' ? request.id : String(request.id ?? 'unknown');
}
