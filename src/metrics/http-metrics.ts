import type { NextFunction, Request, Response } from 'express';
import type { Metrics } from './metrics';

/** Times every request; the route label is the route's pattern, never the raw URL. */
export function httpMetricsMiddleware(metrics: Metrics) {
  return (request: Request, response: Response, next: NextFunction): void => {
    const end = metrics.httpRequests.startTimer();
    response.once('finish', () => {
      const route = (request.route as { path?: string } | undefined)?.path;
      end({
        method: request.method,
        route: route ? `${request.baseUrl}${route}` : 'unmatched',
        status: String(response.statusCode),
      });
    });
    next();
  };
}
