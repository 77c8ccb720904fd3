import { connect } from 'node:net';

/**
 * Bytes no HTTP client would send, on a raw connection; resolves with
 * everything the server wrote once it closes the connection, or rejects if it
 * has not within `withinMs`. `endWrites: false` sends the bytes and nothing
 * more without closing our side, as a slow or stalled client would.
 */
export function sendRaw(
  url: string,
  bytes: string,
  { endWrites = true, withinMs = 10_000 }: { endWrites?: boolean; withinMs?: number } = {},
): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => (endWrites ? socket.end(bytes) : socket.write(bytes)));
    let received = '';
    const deadline = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for more than ${withinMs} ms; it wrote: ${received}`));
    }, withinMs);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(deadline);
      resolve(received);
    });
  });
}

/** A raw answer's status, headers (names in lower case) and JSON body. */
export function parseRaw(answer: string): { status: number; headers: Record<string, string>; body: unknown } {
  const [head, body] = answer.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}
