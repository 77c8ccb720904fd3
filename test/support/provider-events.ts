import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';

export interface SignedEvent {
  /** The body the signature covers, as text. */
  body: string;
  /** webhook-id, signed with the body. */
  id: string;
  secret: string;
  at?: Date;
  /** What is sent instead of `body` (a tampered body): the signature stays that of `body`. */
  sent?: string;
}

/** POST /v1/provider/events as the provider sends it: Standard Webhooks headers signed over `body`. */
export function postSignedEvent(url: string, { body, id, secret, at = new Date(), sent = body }: SignedEvent): request.Test {
  return request(url)
    .post('/v1/provider/events')
    .set('Content-Type', 'application/json')
    .set('webhook-id', id)
    .set('webhook-timestamp', String(Math.floor(at.getTime() / 1000)))
    .set('webhook-signature', new Webhook(secret).sign(id, at, body))
    .send(sent);
}

/** Rows of processed_messages: what provider events were recorded as consumed. */
export async function processedMessages(dataSource: DataSource): Promise<number> {
  const [{ n }] = (await dataSource.query('SELECT count(*)::int AS n FROM processed_messages')) as { n: number }[];
  return n;
}
