import type { IncomingMessage, Server, ServerResponse } from 'node:http';

/**
 * Closing the server keeps a connection open for keepAliveTimeout after its
 * last reply: the replies still in flight when a shutdown signal comes carry
 * Connection: close instead, so the process exits as soon as they are sent
 * and no client reuses a connection that is about to go away.
 */
export function closeConnectionsAfterReplyOnShutdown(server: Server): void {
  const inFlight = new Set<ServerResponse>();
  server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    inFlight.add(response);
    response.once('close', () => inFlight.delete(response));
  });
  const closeAfterReply = () => {
    for (const response of inFlight) {
      if (!response.headersSent) response.setHeader('Connection', 'close');
    }
  };
  process.once('SIGTERM', closeAfterReply);
  process.once('SIGINT', closeAfterReply);
}
