import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import { signedWebhookRequest } from '../../src/common/signed-webhook';

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

/** POST /v1/provider/events as the provider sends it: Standard Webhooks headers signed over `body`, as every sender here signs. */
export function postSignedEvent(url: string, { body, id, secret, at = new Date(), sent = body }: SignedEvent): request.Test {
  const { headers } = signedWebhookRequest(new Webhook(secret), id, body, at);
  return request(url).post('/v1/provider/events').set(headers).send(sent);
}

/** Rows of processed_messages: what provider events were recorded as consumed. */
export async function processedMessages(dataSource: DataSource): Promise<number> {
  const [{ n }] = (await dataSource.query('SELECT count(*)::int AS n FROM processed_messages')) as { n: number }[];
  return n;
}
