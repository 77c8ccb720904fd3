import type { IncomingMessage, ServerResponse } from 'node:http';
import { LoggerModule, PinoLogger } from 'nestjs-pino';
import { type Options, pinoHttp } from 'pino-http';
import type { AppConfig } from '../config/app-config';
import { requestForLog, serializedErrorForLog } from './log-safety';
import { requestIdFor } from './request-id';

/** One line per request, tagged with a request id the response also carries. */
export function requestLogOptions(): Options {
  return {
    // The id http-app.ts already sent back in X-Request-Id.
    genReqId: requestIdFor,
    customLogLevel: (_request, response, error) =>
      error || response.statusCode >= 500 ? 'error' : response.statusCode >= 400 ? 'warn' : 'info',
    // Never log credentials: no credential header, no key-shaped string in the URL or any header.
    // An error is its class, code and message (errorForLog): a stack tells an
    // operator nothing the request id does not, and lays out the code's paths.
    serializers: { req: requestForLog, err: serializedErrorForLog },
    autoLogging: { ignore: (request) => request.url?.startsWith('/health') ?? false },
  };
}

/** JSON logs through pino; the request log line is written by Nest's middleware (see requestLogger). */
export function loggingModule(config: Pick<AppConfig, 'logLevel'>, name: string) {
  return LoggerModule.forRoot({ pinoHttp: { name, level: config.logLevel, ...requestLogOptions() } });
}

/** The request logging of a request answered before Nest's middleware runs (EarlyAnswers). */
export interface RequestLogging {
  /**
   * Starts the request log line: the same line, through the same root
   * logger, as loggingModule's middleware starts for every other request.
   * It is written when the response finishes, or when the client leaves
   * first; its responseTime runs from here.
   */
  start(request: IncomingMessage, response: ServerResponse): void;
  /** Runs `work` so that what it logs carries the request, as every line logged under Nest's middleware does. */
  within<T>(request: IncomingMessage, work: () => T): T;
}

export function requestLogging(): RequestLogging {
  if (!PinoLogger.root) throw new Error('requestLogging needs the application built with loggingModule first');
  const middleware = pinoHttp({ ...requestLogOptions(), logger: PinoLogger.root });
  // runInContext derives from the root logger, which exists by now: these options are not read.
  const context = new PinoLogger({ pinoHttp: {} });
  return {
    start: (request, response) => middleware(request, response),
    within: (request, work) => context.runInContext(work, { bindings: { req: request } }),
  };
}
