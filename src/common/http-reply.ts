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
