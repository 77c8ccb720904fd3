import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import type { Request, Response } from 'express';
import type { Observable } from 'rxjs';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';

/**
 * PROVIDER_LATENCY_MS, PROVIDER_FAILURE_RATE and PROVIDER_POISON_RATE for load
 * and chaos runs, and the caller's deadline. It runs before validation and the
 * service, so an injected failure or a request past its deadline records
 * nothing and does not count as a call for the tokens that refuse their first
 * calls. A poisoned answer is the opposite: the call is served and recorded as
 * usual, and only the body of its 2xx answer is replaced (see poisonedBody).
 */
@Injectable()
export class FaultInjectionInterceptor implements NestInterceptor {
  private readonly logger = new Logger(FaultInjectionInterceptor.name);

  constructor(@InjectConfig() private readonly config: AppConfig) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const arrivedAt = performance.now();
    const { latencyMs, failureRate, poisonRate } = this.config.mockProvider;
    if (latencyMs > 0) await delay(latencyMs);
    const waitMs = callerWaitMs(context.switchToHttp().getRequest<Request>());
    // The caller has stopped listening: work done now would be for nobody, and a
    // charge recorded now would surface only later, through reconciliation.
    if (waitMs !== undefined && performance.now() - arrivedAt >= waitMs) {
      this.logger.log({ msg: 'caller stopped waiting; request dropped before any work', waitMs });
      throw new MockProviderError(
        MockProviderErrorCode.DeadlineExceeded,
        `The caller stopped waiting after ${waitMs} ms, before the work started`,
      );
    }
    if (Math.random() < failureRate) {
      throw new MockProviderError(
        MockProviderErrorCode.ServiceUnavailable,
        'Injected failure (PROVIDER_FAILURE_RATE)',
      );
    }
    if (poisonRate > 0 && Math.random() < poisonRate) {
      this.poisonAnswer(context.switchToHttp().getResponse<Response>());
    }
    return next.handle();
  }

  /**
   * Replaces the body of this answer, if it is a 2xx, by a poisoned one. The
   * handler runs untouched (the charge or refund and its events are recorded as
   * they would be), and the object it answers with is not changed: every route
   * answers through response.json, which is wrapped for this response alone.
   */
  private poisonAnswer(response: Response): void {
    const json = response.json.bind(response);
    response.json = (body: unknown) => {
      if (response.statusCode < 200 || response.statusCode >= 300) return json(body);
      const kind = POISON_KINDS[Math.floor(Math.random() * POISON_KINDS.length)];
      this.logger.log({ msg: 'answer poisoned (PROVIDER_POISON_RATE)', kind });
      return response.type('application/json').send(poisonedBody(body, kind, Math.random));
    };
  }
}

/** The ways a poisoned answer is unusable; each is drawn with the same chance. */
export const POISON_KINDS = [
  /** failure_code ends in U+0000 (`\u0000` in the JSON), which a Postgres text column cannot hold. */
  'nul_in_failure_code',
  /** The charge (or refund) id ends in U+0000. */
  'nul_in_id',
  /** The id or failure_code ends in a lone surrogate, escaped in the JSON (`\ud800`): no UTF-8 text can hold it. */
  'lone_surrogate',
  /** A 300-character failure_code. */
  'long_failure_code',
  /** The amount as a string: "500". */
  'amount_as_string',
  /** One of id, status, amount, currency, failure_code (and a refund's charge) left out. */
  'missing_field',
  /** An HTML page under a JSON Content-Type. */
  'not_json',
  /** The JSON text cut short. */
  'truncated_json',
] as const;
export type PoisonKind = (typeof POISON_KINDS)[number];

/** The fields a caller cannot do without, those of a charge first: a refund adds its charge's id. */
const NEEDED_FIELDS = ['id', 'status', 'amount', 'currency', 'failure_code', 'charge'] as const;

/**
 * The text of a poisoned answer for this charge (or refund) body. Works on a
 * copy: the record, and what any other answer shows of it, stays true.
 */
export function poisonedBody(body: unknown, kind: PoisonKind, random: () => number): string {
  const charge: Record<string, unknown> = typeof body === 'object' && body !== null ? { ...body } : {};
  const failureCode = typeof charge.failure_code === 'string' ? charge.failure_code : 'do_not_honor';
  switch (kind) {
    case 'nul_in_failure_code':
      charge.failure_code = `${failureCode}\u0000`;
      break;
    case 'nul_in_id':
      charge.id = `${String(charge.id)}\u0000`;
      break;
    case 'lone_surrogate':
      if (random() < 0.5) charge.id = `${String(charge.id)}\ud800`;
      else charge.failure_code = `${failureCode}\ud800`;
      break;
    case 'long_failure_code':
      charge.failure_code = `${failureCode}_`.padEnd(300, 'x');
      break;
    case 'amount_as_string':
      charge.amount = String(charge.amount);
      break;
    case 'missing_field': {
      const present = NEEDED_FIELDS.filter((field) => field in charge);
      delete charge[present[Math.floor(random() * present.length)]!];
      break;
    }
    case 'not_json':
      return '<html><body><h1>200 OK</h1><p>Your charge is being processed.</p></body></html>';
    case 'truncated_json': {
      // Any strict prefix of an object's text is not JSON: its closing brace is missing.
      const text = JSON.stringify(charge);
      return text.slice(0, 1 + Math.floor(random() * (text.length - 1)));
    }
  }
  // JSON.stringify escapes U+0000 and a lone surrogate (\u0000, \ud800): the body is still well-formed UTF-8.
  return JSON.stringify(charge);
}

/**
 * X-Request-Deadline-Ms: how long the caller waits for this reply, counted from
 * arrival. A value we cannot read is ignored, as a real service ignores a header
 * it does not understand.
 */
function callerWaitMs(request: Request): number | undefined {
  const value = request.header('X-Request-Deadline-Ms')?.trim();
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}
