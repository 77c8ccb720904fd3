import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Type } from '@nestjs/common';
import type { AuthFailureLimiter } from '../clients/auth-failure-limiter';
import type { ClientRateLimit } from '../clients/client-rate-limit';
import type { ClientsService } from '../clients/clients.service';
import { errorReply } from '../common/error-envelope';
import { asApiError, countConflict, replyForError } from '../common/error-envelope.filter';
import { type HttpReply, writeReply } from '../common/http-reply';
import { parsedBodyProblem } from '../common/json-body';
import type { JsonBodyReader } from '../common/json-body-reader';
import { requestIdFor } from '../common/request-id';
import type { StrictValidationPipe } from '../common/validation';
import type { AnswerCache } from '../idempotency/answer-cache';
import { parseIdempotencyKey, requestFingerprint } from '../idempotency/idempotency-key';
import type { Metrics } from '../metrics/metrics';
import { writeCommandOf } from '../operations/idempotent-post';
import { type WriteCommand, replayOf } from '../operations/idempotent-writes';
import type { PaymentLookupService } from './payment-lookup.service';

/** The read's route as Express names it (the metrics' route label). */
const PAYMENT_ROUTE = '/v1/payments/:id';

/** One payment's path as the client that polls it spells it; an id with %-escapes is left to Express to decode. */
const PAYMENT_PATH = /^\/v1\/payments\/([^/?%]+)$/;

/**
 * An idempotent write answered here: its route (exactly as Express names
 * it), the body its route validates, the service call its controller makes,
 * and what that service counts of a reply it gives, which a replay answered
 * here must count too.
 */
export interface EarlyWrite {
  route: string;
  body: Type;
  run(command: WriteCommand & { body: object }): Promise<HttpReply>;
  countReplay?(reply: HttpReply): void;
}

export interface EarlyAnswersParts {
  clients: ClientsService;
  authFailures: AuthFailureLimiter;
  rateLimit: ClientRateLimit;
  answers: AnswerCache;
  writes: EarlyWrite[];
  lookup: PaymentLookupService;
  /** The pipeline's body validation (Nest's global pipe), run here as the route would run it. */
  validation: StrictValidationPipe;
  metrics: Metrics;
  body: JsonBodyReader;
  /** The request log line (pino-http), started once a request is known to be answered here. */
  logRequest: (request: IncomingMessage, response: ServerResponse) => void;
}

/** What is sent: the reply and the rate limit's headers. */
interface Answer {
  limitHeaders: Record<string, string>;
  reply: HttpReply;
}

type Ask = { request: IncomingMessage; response: ServerResponse; clientId: string };

type WriteAsk = Ask & { write: EarlyWrite };

/**
 * The answers clients ask for nearly all the time, served before Express and
 * Nest see the request: a new payment or refund (the idempotent writes, see
 * EarlyWrite), a retry of a finished one whose final answer this process
 * holds (AnswerCache), and a read of one payment, the poll that follows a
 * 202. Through the framework each costs its own work
 * and a share as large again or larger (a fifth of a create, most of a
 * replay). They are answered with the services and the validation the routes
 * use, counted against the same rate limit (ClientRateLimit: past it, the
 * guard's 429), with the same headers, metrics and request log line;
 * everything else, and every request not spelled exactly as below, goes to
 * the full pipeline untouched (`handOn`), but for a body already read
 * (JsonBodyReader).
 *
 * Common to all: a Host header, and an API key this process knows without
 * a lookup while no address is refused for failed authentications.
 *
 * - Replay: a write's `POST` with a well-formed key whose final answer is
 *   here, and a body the parser and the body checks accept whose fingerprint
 *   is the key's. Such a body is the one the key was claimed with, which
 *   passed validation then, so validation is not run again. Anything else
 *   (another body on the key, a body the checks refuse) is handed on once
 *   the body is read, to be answered as before.
 * - Create: a write's `POST` whose key has no answer here, with a body the
 *   parser, the body checks and the route's validation accept: the
 *   controller's call to its service, and whatever it answers or
 *   throws in the filter's envelope (key conflicts counted as the filter
 *   counts them). A body any check refuses is handed on, so the pipeline
 *   answers it in its own order (rate limit, then validation).
 * - Read: `GET /v1/payments/{id}` without a body or a query: the lookup the
 *   route makes, its answer or its error in the filter's envelope.
 */
export class EarlyAnswers {
  private readonly writes: Map<string, EarlyWrite>;

  constructor(private readonly parts: EarlyAnswersParts) {
    this.writes = new Map(parts.writes.map((write) => [write.route, write]));
  }

  /** Answers `request`, or calls `handOn` to let the full pipeline answer it. */
  handle(request: IncomingMessage, response: ServerResponse, handOn: () => void): void {
    const write = request.method === 'POST' ? this.writes.get(request.url ?? '') : undefined;
    const id = request.method === 'GET' && !hasBody(request) ? PAYMENT_PATH.exec(request.url ?? '')?.[1] : undefined;
    const clientId = write || id !== undefined ? this.knownClient(request) : undefined;
    if (clientId === undefined) return handOn();
    const ask = { request, response, clientId };
    if (!write) return this.read(ask, id!);
    const key = this.cachedKey(request, clientId);
    if (key === undefined) return this.create({ ...ask, write }, handOn);
    this.replay({ ...ask, write }, key, handOn);
  }

  private knownClient(request: IncomingMessage): string | undefined {
    if (request.headers.host === undefined || this.parts.authFailures.mayRefuseSome()) return undefined;
    return this.parts.clients.knownClient(request.headersDistinct.authorization)?.id;
  }

  /** The request's idempotency key, when its final answer is here. */
  private cachedKey(request: IncomingMessage, clientId: string): string | undefined {
    let key: string;
    try {
      key = parseIdempotencyKey(request.headersDistinct['idempotency-key']);
    } catch {
      return undefined;
    }
    return this.parts.answers.get(clientId, key) ? key : undefined;
  }

  private replay(ask: WriteAsk, key: string, handOn: () => void): void {
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'POST', route: ask.write.route });
    void this.parts.body.read(ask.request, ask.response).then((error) => {
      // Whatever goes wrong here (a body the fingerprint cannot take), the pipeline answers it as it would have.
      let answer: Answer | undefined;
      try {
        answer = error === undefined ? this.replayOf(ask, key) : undefined;
      } catch {
        answer = undefined;
      }
      if (!answer) return handOn();
      this.send(ask, answer, endTimer);
    });
  }

  /** The replay once the body is in (or the rate limit's 429); undefined to hand on. */
  private replayOf({ request, clientId, write }: WriteAsk & { request: { body?: unknown } }, key: string): Answer | undefined {
    if (parsedBodyProblem(request)) return undefined;
    // Asked again: the key may have expired while its body arrived.
    const known = this.parts.answers.get(clientId, key);
    if (!known || known.fingerprint !== requestFingerprint('POST', write.route, request.body)) return undefined;
    const { headers: limitHeaders, refusal } = this.parts.rateLimit.take(clientId);
    if (refusal) return { limitHeaders, reply: errorReply(refusal) };
    const reply = replayOf(known.response);
    write.countReplay?.(reply);
    return { limitHeaders, reply };
  }

  private create(ask: WriteAsk, handOn: () => void): void {
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'POST', route: ask.write.route });
    void this.parts.body.read(ask.request, ask.response).then(async (error) => {
      const command = error === undefined ? await this.createCommandOf(ask) : undefined;
      if (!command) return handOn();
      const { headers: limitHeaders, refusal } = this.parts.rateLimit.take(ask.clientId);
      if (refusal) return this.send(ask, { limitHeaders, reply: errorReply(refusal) }, endTimer);
      this.send(ask, { limitHeaders, reply: await this.written(ask, command) }, endTimer);
    });
  }

  /**
   * The controller's command once the body is in; undefined to hand on: a
   * body some check refuses (or the fingerprint cannot take) is the
   * pipeline's to answer.
   */
  private async createCommandOf({
    request,
    clientId,
    write,
  }: WriteAsk & { request: { body?: unknown } }): Promise<(WriteCommand & { body: object }) | undefined> {
    try {
      if (parsedBodyProblem(request)) return undefined;
      const body = (await this.parts.validation.transform(request.body, { type: 'body', metatype: write.body })) as object;
      return { ...writeCommandOf(clientId, requestFingerprint('POST', write.route, request.body), request), body };
    } catch {
      return undefined;
    }
  }

  /** What the service answers, or what it threw in the filter's envelope. */
  private async written({ request, write }: WriteAsk, command: WriteCommand & { body: object }): Promise<HttpReply> {
    try {
      return await write.run(command);
    } catch (thrown) {
      const known = asApiError(thrown);
      countConflict(this.parts.metrics, known);
      return replyForError(thrown, known, requestIdFor(request));
    }
  }

  private read(ask: Ask, id: string): void {
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'GET', route: PAYMENT_ROUTE });
    const { headers: limitHeaders, refusal } = this.parts.rateLimit.take(ask.clientId);
    if (refusal) return this.send(ask, { limitHeaders, reply: errorReply(refusal) }, endTimer);
    this.parts.lookup.get(ask.clientId, id).then(
      (payment) => this.send(ask, { limitHeaders, reply: { status: 200, body: JSON.stringify(payment), headers: {} } }, endTimer),
      (error: unknown) => this.send(ask, { limitHeaders, reply: replyForError(error, asApiError(error), requestIdFor(ask.request)) }, endTimer),
    );
  }

  /** Logs, times and writes the answer. */
  private send({ request, response }: Ask, { limitHeaders, reply }: Answer, endTimer: (labels: { status: string }) => void): void {
    this.parts.logRequest(request, response);
    response.once('finish', () => endTimer({ status: String(response.statusCode) }));
    writeReply(response, requestIdFor(request), reply, limitHeaders);
  }
}

/** Whether the request says it carries bytes, which the pipeline's parser would read and might refuse. */
function hasBody(request: IncomingMessage): boolean {
  return request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] ?? '0') !== '0';
}
