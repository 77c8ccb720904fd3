import { type IncomingMessage, STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Logger } from '@nestjs/common';
import { errorReply, fromClientError, methodNotAllowed } from './error-envelope';
import { ANSWER_HEADERS, type HttpReply } from './http-reply';
import { REQUEST_ID_HEADER, newRequestId } from './request-id';
import { TransportError, TransportErrorCode } from './transport-error';

function rawResponse(reply: HttpReply, requestId: string): string {
  const headers = {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(reply.body)),
    ...ANSWER_HEADERS,
    [REQUEST_ID_HEADER]: requestId,
    ...reply.headers,
    Connection: 'close',
  };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status]}\r\n${lines.join('')}\r\n${reply.body}`;
}

/**
 * Node's HTTP parser refuses some requests before any request object exists:
 * a malformed request line or header (400), headers past the size limit
 * (431), a request not received within the server's requestTimeout (408).
 * Node then writes a bare status line. This answers as Node does (the same
 * statuses, only while nothing of another answer is on the socket, then the
 * connection is closed) but in the envelope, with the answer headers and a
 * request id that is also logged.
 */
export function answerClientErrorsInEnvelope(server: Server): void {
  const logger = new Logger('HttpParser');
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    // The answer in progress on this connection, as Node's own handler reads
    // it: once its headers are out, another answer would corrupt the stream.
    const inProgress = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (error.code !== 'ECONNRESET' && socket.writable && !inProgress?.headersSent) {
      const requestId = newRequestId();
      const reply = errorReply(fromClientError(error.code));
      logger.warn({ msg: 'request refused by the HTTP parser', requestId, code: error.code, status: reply.status });
      socket.write(rawResponse(reply, requestId));
    }
    socket.destroy();
  });
}

/**
 * CONNECT never reaches the app: Node hands it to the server's 'connect'
 * listeners and, with none, closes the connection without a word. No route
 * serves it, so it is answered as any other method no route serves: 405
 * with Allow where the path has routes, 404 elsewhere (an authority such as
 * `host:443` is no path). `allowedAt` gives the methods the app answers at a path.
 */
export function answerConnectInEnvelope(server: Server, allowedAt: (path: string) => string[]): void {
  const logger = new Logger('HttpParser');
  server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    const target = request.url ?? '';
    const allow = target.startsWith('/') ? allowedAt(target.split('?')[0]) : [];
    const error = allow.length > 0 ? methodNotAllowed('CONNECT', allow) : new TransportError(TransportErrorCode.RouteNotFound, 'No such route.');
    const requestId = newRequestId();
    const reply = errorReply(error);
    logger.warn({ msg: 'CONNECT refused', requestId, status: reply.status });
    socket.end(rawResponse(reply, requestId));
  });
}

/**
 * An Expect other than 100-continue, which Node answers itself with a bare
 * 417 unless the server listens for it: the same 417, in the envelope. The
 * request goes no further (RFC 9110 10.1.1).
 */
export function answerExpectationsInEnvelope(server: Server): void {
  const logger = new Logger('HttpParser');
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const requestId = newRequestId();
    const reply = errorReply(new TransportError(TransportErrorCode.ExpectationFailed, 'Only the expectation 100-continue is met.'));
    logger.warn({ msg: 'expectation refused', requestId, expect: String(request.headers.expect).slice(0, 100) });
    response
      .writeHead(reply.status, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(reply.body),
        ...ANSWER_HEADERS,
        [REQUEST_ID_HEADER]: requestId,
        ...reply.headers,
        Connection: 'close',
      })
      .end(reply.body);
  });
}
