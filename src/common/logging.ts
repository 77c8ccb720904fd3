import { LoggerModule } from 'nestjs-pino';
import type { AppConfig } from '../config/app-config';
import { requestForLog } from './log-safety';
import { requestIdFor } from './request-id';

/** JSON logs, one line per request, tagged with a request id the response also carries. */
export function loggingModule(config: Pick<AppConfig, 'logLevel'>, name: string) {
  return LoggerModule.forRoot({
    pinoHttp: {
      name,
      level: config.logLevel,
      // The id common/http-app.ts already sent back in X-Request-Id.
      genReqId: requestIdFor,
      customLogLevel: (_request, response, error) =>
        error || response.statusCode >= 500 ? 'error' : response.statusCode >= 400 ? 'warn' : 'info',
      // Never log credentials: no credential header, no key-shaped string in the URL or any header.
      serializers: { req: requestForLog },
      autoLogging: { ignore: (request) => request.url?.startsWith('/health') ?? false },
    },
  });
}
