import 'reflect-metadata';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseQuery } from 'node:querystring';
import { Pool } from 'pg';
import { CodedError } from '../../src/common/coded-error';
import { errorReply, fromBodyParserError, fromInfrastructureError } from '../../src/common/error-envelope';
import { type HttpReply, writeReply } from '../../src/common/http-reply';
import { DomainError, ErrorCode } from '../../src/common/domain-error';
import { parsedBodyProblem } from '../../src/common/json-body';
import { keepRawBody } from '../../src/common/raw-body';
import { requestIdFor } from '../../src/common/request-id';
import { TransportError, TransportErrorCode } from '../../src/common/transport-error';
import { StrictValidationPipe } from '../../src/common/validation';
import { loadConfigOrExit } from '../../src/config/app-config';
import { requestFingerprint } from '../../src/idempotency/idempotency-key';
import { CreatePaymentDto, ListPaymentsQueryDto } from '../../src/payments/payments.dto';
import { FloorPayments } from './floor-flow';

/**
 * The bench's floor: the API's payment routes on node:http and a pg.Pool,
 * with no framework, so that `npm run bench -- --compare` can say what Nest,
 * Express and TypeORM cost on top of the work itself. It does the service's
 * SQL (floor-flow.ts), the same authentication before the body, the same
 * body checks, validation (StrictValidationPipe on CreatePaymentDto, which is
 * class-transformer and class-validator with whitelist and
 * forbidNonWhitelisted) and fingerprint, and answers the same bytes. Not a
 * server to deploy: no rate limit, no metrics, no request timeouts.
 *
 * Run by the bench as a child (dist/scripts/bench/floor.js) with the API's
 * environment variables; writes `{"msg":"listening","port":…}` like the API.
 */

/** As the API's JSON body parser: anything bigger is refused unread. */
const BODY_LIMIT_BYTES = 64 * 1024;
const PAYMENTS_PATH = '/v1/payments';

const config = loadConfigOrExit();
const pool = new Pool({
  connectionString: config.databaseUrl,
  max: config.databasePool.size,
  connectionTimeoutMillis: config.databasePool.acquireTimeoutMs,
  statement_timeout: 10_000,
  idle_in_transaction_session_timeout: 10_000,
});
// A connection that dies while idle must not end the process; its next query fails instead.
pool.on('error', () => undefined);
const flow = new FloorPayments(pool, config);
const pipe = new StrictValidationPipe();

type Request = IncomingMessage & { body?: unknown };

/** The body as the API's express.json() reads it, or the TransportError it would answer. */
async function readJsonBody(request: Request): Promise<unknown> {
  const [mediaType, ...parameters] = (request.headers['content-type'] ?? '').split(';').map((part) => part.trim().toLowerCase());
  const charset = parameters.find((part) => part.startsWith('charset='))?.slice('charset='.length) ?? 'utf-8';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT_BYTES) throw fromBodyParserError({ type: 'entity.too.large' });
    chunks.push(chunk as Buffer);
  }
  if (mediaType !== 'application/json') return undefined;
  const bytes = Buffer.concat(chunks);
  keepRawBody(request, undefined, bytes, charset.replace(/^"|"$/g, ''));
  if (bytes.length === 0) return {};
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw fromBodyParserError({ type: 'entity.parse.failed' });
  }
}

async function createPayment(request: Request, clientId: string): Promise<HttpReply> {
  request.body = await readJsonBody(request);
  const problem = parsedBodyProblem(request);
  if (problem) {
    const details = problem.param === '' ? {} : { param: problem.param };
    throw new DomainError(ErrorCode.ParameterInvalid, problem.message, details);
  }
  const body = (await pipe.transform(request.body, { type: 'body', metatype: CreatePaymentDto })) as CreatePaymentDto;
  return flow.create({
    clientId,
    idempotencyKeyHeader: request.headersDistinct['idempotency-key'],
    fingerprint: requestFingerprint('POST', PAYMENTS_PATH, request.body),
    body,
    requestId: requestIdFor(request),
  });
}

function json(status: number, value: unknown): HttpReply {
  return { status, body: JSON.stringify(value), headers: {} };
}

async function answer(request: Request, path: string, search: string): Promise<HttpReply> {
  if (path === '/health/live') return json(200, { status: 'ok' });
  if (!path.startsWith(PAYMENTS_PATH)) throw new TransportError(TransportErrorCode.RouteNotFound, 'No such route.');
  const client = await flow.clients.authenticate(request.headersDistinct.authorization);
  if (path === PAYMENTS_PATH && request.method === 'POST') return createPayment(request, client.id);
  if (path === PAYMENTS_PATH && request.method === 'GET') {
    const query = (await pipe.transform(parseQuery(search), { type: 'query', metatype: ListPaymentsQueryDto })) as ListPaymentsQueryDto;
    return json(200, await flow.lookup.list(client.id, { limit: query.limit, startingAfter: query.starting_after }));
  }
  const id = /^\/v1\/payments\/([^/]+)$/.exec(path)?.[1];
  if (id !== undefined && request.method === 'GET') return json(200, await flow.lookup.get(client.id, decodeURIComponent(id)));
  throw new TransportError(TransportErrorCode.RouteNotFound, 'No such route.');
}

function replyFor(error: unknown): HttpReply {
  if (error instanceof CodedError) return errorReply(error as DomainError | TransportError);
  return errorReply(fromInfrastructureError(error) ?? new TransportError(TransportErrorCode.Internal, 'An unexpected error occurred.'));
}

function send(request: Request, response: ServerResponse, reply: HttpReply): void {
  // Refused before its body was read (a failed authentication): close rather than drain it, as the API does.
  writeReply(response, requestIdFor(request), reply, request.complete ? {} : { Connection: 'close' });
}

const server = createServer((request: Request, response) => {
  const url = new URL(request.url ?? '/', 'http://floor');
  const path = url.pathname.replace(/\/+$/, '');
  answer(request, path, url.search.slice(1)).then(
    (reply) => send(request, response, reply),
    (error: unknown) => send(request, response, replyFor(error)),
  );
});
server.requestTimeout = config.http.requestTimeoutMs;

async function stop(): Promise<void> {
  server.close();
  server.closeIdleConnections();
  await pool.end();
  process.exit(0);
}
// Leave with the bench that started us, however it ended.
process.once('disconnect', () => void stop());
process.once('SIGTERM', () => void stop());
server.listen(config.http.port, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port })}\n`);
});
