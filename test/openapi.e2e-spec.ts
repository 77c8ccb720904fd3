import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import createClient from 'openapi-fetch';
import type { paths } from '../client/src/generated/api-types';
import { GENERATED, typesFor } from '../scripts/openapi';
import { useProcessStack } from './support/process-stack';
import { eventually } from './support/eventually';

jest.setTimeout(30_000);

/**
 * The OpenAPI document as the API serves it is the one committed, and a
 * client generated from it (openapi-typescript types, openapi-fetch) speaks
 * to the real API: a route, parameter or schema that drifts from the service
 * fails to compile here or fails these checks.
 */
describe('the OpenAPI document and a client generated from it', () => {
  const stack = useProcessStack({ client: 'openapi' });
  const api = () =>
    createClient<paths>({ baseUrl: stack.api.url, headers: { Authorization: `Bearer ${stack.apiKey}` } });

  it('is served at /docs-json exactly as committed, with the committed types generated from it', async () => {
    const served = await (await fetch(`${stack.api.url}/docs-json`)).text();
    const document = `${JSON.stringify(JSON.parse(served), null, 2)}\n`;

    expect(document).toBe(readFileSync(GENERATED.document, 'utf8'));
    const types = await typesFor(document);
    expect(types).toBe(readFileSync(GENERATED.types, 'utf8'));
  });

  it('creates, replays, reads and lists a payment through the generated client', async () => {
    const key = randomUUID();
    const body = { amount: 1_200, currency: 'EUR' as const, payment_method: 'pm_card_ok', order_id: `ord_${key.slice(0, 8)}` };
    const params = { header: { 'Idempotency-Key': key } };

    const first = await api().POST('/v1/payments', { params, body });
    const replay = await api().POST('/v1/payments', { params, body });

    expect(first.response.status).toBe(201);
    expect(first.data).toMatchObject({ object: 'payment', status: 'succeeded', amount: 1_200 });
    expect(replay.response.headers.get('Idempotent-Replayed')).toBe('true');
    expect(replay.data).toEqual(first.data);
    const id = first.data!.id;
    const read = await api().GET('/v1/payments/{id}', { params: { path: { id } } });
    expect(read.data).toEqual(first.data);
    const listed = await api().GET('/v1/payments', { params: { query: { limit: 1 } } });
    expect(listed.data).toEqual({ object: 'list', data: [first.data], has_more: false });
    const events = await eventually(async () => {
      const listed = await api().GET('/v1/events', { params: { query: { type: 'payment.succeeded' } } });
      return listed.data?.data.length ? listed : undefined;
    }, { what: 'the payment’s event in the list' });
    expect(events.data?.data.map((event) => event.data.object)).toEqual([first.data]);
  });

  it('reads the error envelope and the declined payment of a 402 through the generated types', async () => {
    const declined = await api().POST('/v1/payments', {
      params: { header: { 'Idempotency-Key': randomUUID() } },
      body: { amount: 1_200, currency: 'EUR', payment_method: 'pm_card_declined' },
    });
    const invalid = await api().POST('/v1/payments', {
      params: { header: { 'Idempotency-Key': randomUUID() } },
      body: { amount: 0, currency: 'EUR', payment_method: 'pm_card_ok' },
    });

    expect(declined.response.status).toBe(402);
    expect(declined.error).toMatchObject({ error: { code: 'card_declined', payment: { status: 'failed' } } });
    expect(invalid.response.status).toBe(400);
    expect(invalid.error).toMatchObject({ error: { code: 'parameter_invalid', param: 'amount' } });
  });
});
