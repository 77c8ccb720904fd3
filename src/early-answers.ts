import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Type } from '@nestjs/common';
import type { AuthFailureLimiter } from './clients/auth-failure-limiter';
import type { ClientRateLimit } from './clients/client-rate-limit';
import type { ClientsService } from './clients/clients.service';
import { errorReply } from './common/error-envelope';
import { asApiError, countedReplyForError, replyForError } from './common/error-envelope.filter';
import { type HttpReply, writeReply } from './common/http-reply';
import { parsedBodyProblem } from './common/json-body';
import type { JsonBodyReader } from './common/json-body-reader';
import type { RequestLogging } from './common/logging';
import { requestIdFor } from './common/request-id';
import type { StrictValidationPipe } from './common/validation';
import type { AnswerCache, FinalAnswer } from './idempotency/answer-cache';
import { parseIdempotencyKey, requestFingerprint } from './idempotency/idempotency-key';
import type { Metrics } from './metrics/metrics';
import { writeCommandOf } from './operations/idempotent-post';
import { type WriteCommand, replayOf } from './operations/idempotent-writes';
import type { PaymentLookupService } from './payments/payment-lookup.service';

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
export interface EarlyWrite<Body extends object = object> {
  route: string;
  body: Type<Body>;
  run(command: WriteCommand & { body: Body }): Promise<HttpReply>;
  countReplay?(reply: HttpReply): void;
}

/** An EarlyWrite whose body class and service call are checked to agree. */
export function earlyWrite<Body extends object>(write: EarlyWrite<Body>): EarlyWrite {
  return write as EarlyWrite;
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
  /** The request log line (pino-http), started once a request is known to be answered here, and its log context. */
  logging: RequestLogging;
}

type Ask = { request: IncomingMessage; response: ServerResponse; clientId: string };

type WriteAsk = Ask & { write: EarlyWrite };

/**
 * The answers clients ask for nearly all the time, served before Express and
 * Nest see the request: a new payment or refund (the idempotent writes, see
 * EarlyWrite), a retry of one whose final answer this process holds
 * (AnswerCache), and a read of one payment, the poll that follows a 202.
 * Through the framework each costs its own work and a share as large again
 * or larger (an eighth of a create's CPU, most of a replay's). They are answered with
 * the services and the validation the routes use, in the pipeline's order
 * from its guards on: the request log line starts, the rate limit is taken
 * (ClientRateLimit: past it, the guard's 429), then the route's work, with
 * the same headers, metrics and log lines (tied to the request) and the
 * filter's envelope for anything refused or thrown. Everything else, and
 * every request not spelled exactly as below, goes to the full pipeline
 * untouched (`handOn`), but for a body already read (JsonBodyReader).
 *
 * Common to all: a Host header, and an API key this process knows without
 * a lookup while no address is refused for failed authentications.
 *
 * - A write: `POST` on a write's route, with a body the parser and the body
 *   checks accept (any other is handed on: the pipeline refuses it in a
 *   middleware, before any guard). A replay when the key's final answer is
 *   here and the body's fingerprint is the key's: that body passed
 *   validation when the key was claimed, so validation is not run again.
 *   Otherwise the route's work: the body validated into its class, and the
 *   controller's call to its service (key conflicts counted as the filter
 *   counts them).
 * - A read: `GET /v1/payments/{id}` without a body or a query: the lookup the
 *   route makes, its answer or its error.
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
    if (write) this.write({ ...ask, write }, handOn);
    else if (id !== undefined) this.read(ask, id);
  }

  private knownClient(request: IncomingMessage): string | undefined {
    if (request.headers.host === undefined || this.parts.authFailures.mayRefuseSome()) return undefined;
    return this.parts.clients.knownClient(request.headersDistinct.authorization)?.id;
  }

  /**
   * A write's POST, once its body is in: a replay when this process holds the
   * key's final answer and the body is the one it was given for, else the
   * write itself (whose service refuses another body on a used key). A body
   * the parser refused, or accepted but nothing may read, is handed on: the
   * pipeline refuses it before any guard.
   */
  private write(ask: WriteAsk, handOn: () => void): void {
    const { request, response, write } = ask;
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'POST', route: write.route });
    this.parts.body
      .read(request, response)
      .then((error) => {
        if (error !== undefined || parsedBodyProblem(request)) return handOn();
        const known = this.replayable(ask, (request as { body?: unknown }).body);
        if (!known) return this.answer(ask, endTimer, () => this.written(ask));
        this.answer(ask, endTimer, () => {
          const reply = replayOf(known.response);
          write.countReplay?.(reply);
          return reply;
        });
      })
      .catch((error: unknown) => this.failed(ask, error));
  }

  /**
   * The key's final answer, when this process holds it and `body` is the one
   * it was given for. Such a body passed validation when the key was
   * claimed, so it is not validated again, as for a replay read from Postgres.
   */
  private replayable({ request, clientId, write }: WriteAsk, body: unknown): FinalAnswer | undefined {
    try {
      const known = this.parts.answers.get(clientId, parseIdempotencyKey(request.headersDistinct['idempotency-key']));
      // The fingerprint only for a key answered here: a new write's is taken once, by `written`.
      return known && known.fingerprint === requestFingerprint('POST', write.route, body) ? known : undefined;
    } catch {
      // No usable key, or a body the fingerprint cannot take: the write answers it as the route would.
      return undefined;
    }
  }

  /**
   * What the route answers: the body validated into its class, the
   * controller's command and its service's answer, with what the service
   * logs tied to the request; a body validation refuses, or whatever the
   * service throws, in the filter's envelope.
   */
  private async written({ request, clientId, write }: WriteAsk): Promise<HttpReply> {
    const body = (request as { body?: unknown }).body;
    try {
      const validated = (await this.parts.validation.transform(body, { type: 'body', metatype: write.body })) as object;
      const command = { ...writeCommandOf(clientId, requestFingerprint('POST', write.route, body), request), body: validated };
      return await this.parts.logging.within(request, () => write.run(command));
    } catch (thrown) {
      return countedReplyForError(this.parts.metrics, thrown, asApiError(thrown), requestIdFor(request));
    }
  }

  private read(ask: Ask, id: string): void {
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'GET', route: PAYMENT_ROUTE });
    this.answer(ask, endTimer, async () => {
      try {
        return { status: 200, body: JSON.stringify(await this.parts.lookup.get(ask.clientId, id)), headers: {} };
      } catch (error) {
        return replyForError(error, asApiError(error), requestIdFor(ask.request));
      }
    });
  }

  /**
   * Answers here from now on, as the pipeline would from its guards on: the
   * request log line starts (so it times the work, and is written even if
   * the client leaves), the rate limit is taken (past it, the guard's 429),
   * then `reply` runs.
   */
  private answer(ask: Ask, endTimer: (labels: { status: string }) => void, reply: () => HttpReply | Promise<HttpReply>): void {
    const { request, response, clientId } = ask;
    this.parts.logging.start(request, response);
    response.once('finish', () => endTimer({ status: String(response.statusCode) }));
    // Async, so that a throw anywhere in it, before its first await too, ends in `failed`.
    void (async () => {
      const { headers: limitHeaders, refusal } = this.parts.rateLimit.take(clientId);
      writeReply(response, requestIdFor(request), refusal ? errorReply(refusal) : await reply(), limitHeaders);
    })().catch((error: unknown) => this.failed(ask, error));
  }

  /** What no step above expected: the filter's 500, or a cut connection once the answer has begun (or cannot be written). */
  private failed({ request, response }: Ask, error: unknown): void {
    if (!response.headersSent) {
      try {
        writeReply(response, requestIdFor(request), replyForError(error, undefined, requestIdFor(request)));
        return;
      } catch {
        // Cut below.
      }
    }
    response.destroy();
  }
}

/** Whether the request says it carries bytes, which the pipeline's parser would read and might refuse. */
function hasBody(request: IncomingMessage): boolean {
  return request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] ?? '0') !== '0';
}
