import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { newUlid } from '../../src/common/ulid';
import type { Charge, Refund } from '../../src/mock-provider/mock-provider.types';

/**
 * The provider the bench's API calls: POST /charges, GET /charges/:key and
 * POST /refunds in the mock provider's shapes, with none of its fault
 * injection, events or journal, so that it costs next to nothing and the
 * figures are the API's, not the provider's. Idempotent per
 * Idempotency-Key like the real one, so a retry or the worker's resubmission
 * never makes a second charge. `pm_card_declined` is declined; every other
 * method succeeds.
 *
 * GET /charges?reference=ID lists the charges of one payment (the storm's
 * check), GET /stats counts them all, and the refunds.
 */
const charges = new Map<string, Charge>();
/** Each charge's currency by its id, for its refunds. */
const currencies = new Map<string, string>();
const refunds = new Map<string, Refund>();

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }).end(text);
}

function notFound(response: ServerResponse, message: string): void {
  send(response, 404, { error: { code: 'charge_not_found', message } });
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A POST's Idempotency-Key and JSON body; undefined, with a 400 sent, when either is missing. */
async function keyedRequest(
  request: IncomingMessage,
  response: ServerResponse,
): Promise<{ key: string; params: Record<string, unknown> } | undefined> {
  const key = request.headers['idempotency-key'];
  const params = await readJson(request);
  if (typeof key === 'string' && params) return { key, params };
  send(response, 400, { error: { code: 'parameter_invalid', message: 'an Idempotency-Key and a JSON body are required' } });
  return undefined;
}

async function createCharge(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const asked = await keyedRequest(request, response);
  if (!asked) return;
  const { key, params } = asked;
  let charge = charges.get(key);
  if (!charge) {
    const declined = params.payment_method === 'pm_card_declined';
    charge = {
      id: `ch_${newUlid()}`,
      status: declined ? 'failed' : 'succeeded',
      amount: params.amount as number,
      currency: params.currency as string,
      failure_code: declined ? 'card_declined' : null,
      reference: params.reference as string,
      idempotency_key: key,
      created_at: new Date().toISOString(),
    };
    charges.set(key, charge);
    currencies.set(charge.id, charge.currency);
  }
  send(response, 201, charge);
}

/** Every refund succeeds; the charge it names is taken on trust (the API checked the payment it refunds). */
async function createRefund(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const asked = await keyedRequest(request, response);
  if (!asked) return;
  const { key, params } = asked;
  let refund = refunds.get(key);
  if (!refund) {
    refund = {
      id: `re_${newUlid()}`,
      object: 'refund',
      charge: params.charge as string,
      amount: params.amount as number,
      currency: currencies.get(params.charge as string) ?? 'USD',
      status: 'succeeded',
      failure_code: null,
      reference: params.reference as string,
      idempotency_key: key,
      created_at: new Date().toISOString(),
    };
    refunds.set(key, refund);
  }
  send(response, 201, refund);
}

function route(request: IncomingMessage, response: ServerResponse): Promise<void> | void {
  const url = new URL(request.url ?? '/', 'http://stub');
  if (request.method === 'POST' && url.pathname === '/charges') return createCharge(request, response);
  if (request.method === 'POST' && url.pathname === '/refunds') return createRefund(request, response);
  if (request.method !== 'GET') return send(response, 405, { error: { code: 'method_not_allowed', message: request.method } });
  if (url.pathname === '/health') return send(response, 200, { status: 'ok' });
  if (url.pathname === '/stats') return send(response, 200, { charges: charges.size, refunds: refunds.size });
  if (url.pathname === '/charges') {
    const reference = url.searchParams.get('reference');
    return send(response, 200, [...charges.values()].filter((charge) => reference === null || charge.reference === reference));
  }
  const key = /^\/charges\/([^/]+)$/.exec(url.pathname)?.[1];
  const charge = key === undefined ? undefined : charges.get(decodeURIComponent(key));
  return charge ? send(response, 200, charge) : notFound(response, `No charge was received with key ${key}`);
}

const server = createServer((request, response) => {
  Promise.resolve(route(request, response)).catch((error: unknown) => {
    response.destroy(error instanceof Error ? error : new Error(String(error)));
  });
});
// Leave with the bench that started us, however it ended.
process.once('disconnect', () => process.exit(0));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port })}\n`);
});
