import type { Webhook } from 'standardwebhooks';
import { type Dispatcher, fetch } from 'undici';
import { redactSecrets } from './log-safety';

/** One delivery attempt's request: a JSON body and its Standard Webhooks headers. */
export interface SignedRequest {
  headers: Record<string, string>;
  body: string;
}

/**
 * Signs one attempt per Standard Webhooks. The id is the event's on every
 * attempt, so a receiver drops a redelivery; the timestamp is the attempt's,
 * so the receiver's replay window counts from this attempt. Several signers
 * (a secret being rotated out, and its successor) give one signature each,
 * space-separated, and a receiver holding either secret verifies.
 */
export function signedWebhookRequest(signers: Webhook | readonly Webhook[], id: string, body: string, at: Date): SignedRequest {
  const all = Array.isArray(signers) ? signers : [signers as Webhook];
  return {
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': all.map((webhook) => webhook.sign(id, at, body)).join(' '),
    },
    body,
  };
}

/**
 * Sends one attempt, through `dispatcher`'s connections when given (undici's
 * fetch, the one behind Node's). Undefined when the receiver answered 2xx;
 * otherwise why not (`HTTP 503`, a redirect, a timeout, a refused
 * connection), for the delivery's record, with any credentials in a URL it
 * quotes redacted. Throws only when `stop` aborted it: the sender is
 * shutting down.
 */
export async function postSignedWebhook(
  url: string,
  request: SignedRequest,
  { timeoutMs, stop, dispatcher }: { timeoutMs: number; stop?: AbortSignal; dispatcher?: Dispatcher },
): Promise<string | undefined> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      // A redirect is not an acknowledgement: the receiver must answer 2xx itself.
      redirect: 'manual',
      signal: stop ? AbortSignal.any([stop, timeout]) : timeout,
      dispatcher,
    });
    // The receiver's body says nothing we act on, and may be large.
    await response.body?.cancel();
    if (response.ok) return undefined;
    return response.status >= 300 && response.status < 400
      ? `HTTP ${response.status} (redirects are not followed)`
      : `HTTP ${response.status}`;
  } catch (error) {
    if (stop?.aborted) throw error;
    if (timeout.aborted) return `no answer within ${timeoutMs} ms`;
    const cause = (error as Error & { cause?: Error }).cause;
    return redactSecrets(cause?.message ?? (error as Error).message);
  }
}
