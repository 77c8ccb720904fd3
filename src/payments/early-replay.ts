import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthFailureLimiter } from '../clients/auth-failure-limiter';
import type { ClientRateLimit } from '../clients/client-rate-limit';
import type { ClientsService } from '../clients/clients.service';
import { errorReply } from '../common/error-envelope';
import { ANSWER_HEADERS, type HttpReply } from '../common/http-reply';
import { parsedBodyProblem } from '../common/json-body';
import type { JsonBodyReader } from '../common/json-body-reader';
import { REQUEST_ID_HEADER, requestIdFor } from '../common/request-id';
import type { AnswerCache } from '../idempotency/answer-cache';
import { parseIdempotencyKey, requestFingerprint } from '../idempotency/idempotency-key';
import type { Metrics } from '../metrics/metrics';

export const PAYMENTS_ROUTE = '/v1/payments';

/** What EarlyReplay sends: the reply and the rate limit's headers. */
interface Answer {
  limitHeaders: Record<string, string>;
  reply: HttpReply;
}

export interface EarlyReplayParts {
  clients: ClientsService;
  authFailures: AuthFailureLimiter;
  rateLimit: ClientRateLimit;
  answers: AnswerCache;
  metrics: Metrics;
  body: JsonBodyReader;
  /** The request log line (pino-http), started when the request is known to be answered here. */
  logRequest: (request: IncomingMessage, response: ServerResponse) => void;
}

/**
 * Answers a retry of a finished payment before Express and Nest see it, when
 * this process already holds the key's final answer (AnswerCache): a replay
 * is then the body read, its fingerprint and a write, which through the
 * framework cost three times as much CPU as the work itself.
 *
 * It answers only what the full pipeline would answer the same way, and hands
 * everything else on untouched but for a body already read (JsonBodyReader):
 * only `POST /v1/payments` spelled exactly so, with a Host header, from a
 * client whose key this process knows without a lookup while no address is
 * refused for failed authentications, with a well-formed key whose final
 * answer is here, and a body the parser and the body checks accept whose
 * fingerprint is the key's. Such a body is the one the key was claimed with,
 * which passed validation then, so validation is not run again. It counts
 * against the client's rate limit like any request (a 429 past it, as Nest's
 * guard answers), and writes the same request log line, metrics and headers.
 */
export class EarlyReplay {
  constructor(private readonly parts: EarlyReplayParts) {}

  /** Answers `request`, or calls `handOn` to let the full pipeline answer it. */
  handle(request: IncomingMessage, response: ServerResponse, handOn: () => void): void {
    const replay = this.replayable(request);
    if (!replay) return handOn();
    const endTimer = this.parts.metrics.httpRequests.startTimer({ method: 'POST', route: PAYMENTS_ROUTE });
    void this.parts.body.read(request, response).then((error) => {
      // Whatever goes wrong here (a body the fingerprint cannot take), the pipeline answers it as it would have.
      let answer: Answer | undefined;
      try {
        answer = error === undefined ? this.answerFor(request, replay) : undefined;
      } catch {
        answer = undefined;
      }
      if (!answer) return handOn();
      this.parts.logRequest(request, response);
      response.once('finish', () => endTimer({ status: String(response.statusCode) }));
      send(request, response, answer);
    });
  }

  /** The client and key of a request that may be a replay answered here, judged on its headers alone. */
  private replayable(request: IncomingMessage): { clientId: string; key: string } | undefined {
    if (request.method !== 'POST' || request.url !== PAYMENTS_ROUTE || request.headers.host === undefined) return undefined;
    if (this.parts.authFailures.mayRefuseSome()) return undefined;
    const client = this.parts.clients.knownClient(request.headersDistinct.authorization);
    if (!client) return undefined;
    let key: string;
    try {
      key = parseIdempotencyKey(request.headersDistinct['idempotency-key']);
    } catch {
      return undefined;
    }
    return this.parts.answers.get(client.id, key) ? { clientId: client.id, key } : undefined;
  }

  /** The answer once the body is in, if it is the replay (or the rate limit's 429); undefined to hand on. */
  private answerFor(request: IncomingMessage & { body?: unknown }, { clientId, key }: { clientId: string; key: string }): Answer | undefined {
    if (parsedBodyProblem(request)) return undefined;
    // Asked again: the key may have expired while its body arrived.
    const known = this.parts.answers.get(clientId, key);
    if (!known || known.fingerprint !== requestFingerprint('POST', PAYMENTS_ROUTE, request.body)) return undefined;
    const { headers: limitHeaders, refusal } = this.parts.rateLimit.take(clientId);
    if (refusal) return { limitHeaders, reply: errorReply(refusal) };
    const reply: HttpReply = { ...known.response, headers: { 'Idempotent-Replayed': 'true' } };
    this.parts.metrics.paymentAnswers.inc({ status: String(reply.status), replayed: 'true' });
    return { limitHeaders, reply };
  }
}

/** The headers Express would write for this answer, in its order. */
function send(request: IncomingMessage, response: ServerResponse, { limitHeaders, reply }: Answer): void {
  response
    .writeHead(reply.status, {
      ...ANSWER_HEADERS,
      [REQUEST_ID_HEADER]: requestIdFor(request),
      ...limitHeaders,
      ...reply.headers,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(reply.body),
    })
    .end(reply.body);
}
