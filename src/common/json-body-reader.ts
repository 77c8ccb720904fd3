import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type NextFunction } from 'express';
import typeis from 'type-is';
import { keepRawBody } from './raw-body';

/** Large enough for every field at its limit; anything bigger is refused unread. */
const BODY_LIMIT = '64kb';

const JSON_TYPES = ['application/json'];
/** Content-Type values whose verdict is kept: clients send a handful; once this many are kept, any other is judged every time. */
const MAX_KEPT_VERDICTS = 64;

/**
 * Whether the parser reads `request`'s body: the verdict its default check
 * gives (type-is on the Content-Type, for a request that has a body), kept
 * per header value. type-is parses the value into a media type at every
 * request; that was a twentieth of a replay's CPU for the same few values.
 */
export function jsonBodyChecker(): (request: IncomingMessage) => boolean {
  const verdicts = new Map<string, boolean>();
  return (request) => {
    if (!typeis.hasBody(request)) return false;
    const value = request.headers['content-type'];
    if (value === undefined) return false;
    let verdict = verdicts.get(value);
    if (verdict === undefined) {
      verdict = Boolean(typeis.is(value, JSON_TYPES));
      if (verdicts.size < MAX_KEPT_VERDICTS) verdicts.set(value, verdict);
    }
    return verdict;
  };
}

const READ = Symbol('bodyRead');

type ReadRequest = IncomingMessage & { [READ]?: { error: unknown } };

/**
 * The API's JSON body parser (express.json: UTF-8 only, 64 KB, the raw bytes
 * kept for the duplicate-key pass and signatures), which reads a request's
 * body at most once whoever asks first: EarlyAnswers reads a body before
 * Express sees the request, and when it hands the request on, the pipeline's
 * `middleware` passes on what that reading found (the parser's error, or
 * `request.body`) instead of reading an exhausted stream.
 */
export class JsonBodyReader {
  private readonly parse = express.json({ limit: BODY_LIMIT, strict: false, type: jsonBodyChecker(), verify: keepRawBody });

  /** Reads and parses the body into `request.body`; resolves with the parser's error, undefined when it accepted the body. */
  read(request: IncomingMessage, response: ServerResponse): Promise<unknown> {
    return new Promise((resolve) => {
      this.parse(request as express.Request, response as express.Response, (error?: unknown) => {
        (request as ReadRequest)[READ] = { error };
        resolve(error);
      });
    });
  }

  readonly middleware = (request: express.Request, response: express.Response, next: NextFunction): void => {
    const earlier = (request as ReadRequest)[READ];
    if (earlier) return next(earlier.error);
    this.parse(request, response, next);
  };
}
