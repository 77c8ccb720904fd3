import type { ServerResponse } from 'node:http';
import { REQUEST_ID_HEADER } from './request-id';

/**
 * Sent on every answer of the API process, errors and /health, /metrics and
 * /docs included: nothing it serves is to be sniffed as another type, and
 * nothing it serves may be kept by a cache (an answer is one client's, and
 * a health or a payment state is only true when asked).
 */
export const ANSWER_HEADERS = { 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-store' } as const;

/** An answer exactly as sent: status, body bytes and headers. */
export interface HttpReply {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/**
 * Writes `reply` on a response no framework wrapped, with the headers
 * Express writes for it in the API, in its order: ANSWER_HEADERS, our
 * request id, `extra` (the rate limit's, say), the reply's own, then the
 * JSON content type and length. For the answers given before Express
 * (EarlyAnswers).
 */
export function writeReply(response: ServerResponse, requestId: string, reply: HttpReply, extra: Record<string, string> = {}): void {
  const headers = {
    ...ANSWER_HEADERS,
    [REQUEST_ID_HEADER]: requestId,
    ...extra,
    ...reply.headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(reply.body)),
  };
  // Set one by one rather than handed to writeHead, so that they are the
  // response's own (getHeaders()), which the request log line records.
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
  response.writeHead(reply.status).end(reply.body);
}
