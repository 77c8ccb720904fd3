import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';
const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's own request id is kept when it is sane, so logs join up across services. */
export function requestIdFor(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === 'string' && ACCEPTABLE.test(given) ? given : `req_${randomUUID()}`;
}

/** The id pino-http assigned to this request (see common/logging.ts). */
export function requestIdOf(request: IncomingMessage & { id?: unknown }): string {
  return typeof request.id === 'string' ? request.id : String(request.id ?? 'unknown');
}
