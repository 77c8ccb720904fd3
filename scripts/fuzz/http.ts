import { connect } from 'node:net';

/**
 * The fuzzer's HTTP: a request is the exact bytes written on a fresh
 * connection (fetch and supertest would fix up what the fuzzer means to
 * send broken: repeated headers, non-ASCII bytes, bad framing), and the
 * answer is read until the server closes the connection.
 */

/** A request as it goes on the wire; `bytes` is latin1 text, one character per byte. */
export interface WireRequest {
  bytes: string;
  /** A HEAD's answer has no body, whatever its Content-Length says. */
  head: boolean;
}

export interface WireAnswer {
  status: number;
  /** Lower-case names; a repeated header keeps every value. */
  headers: Record<string, string[]>;
  /** The body as UTF-8 text, chunked framing removed. */
  body: string;
}

export type Exchange =
  | { kind: 'answer'; answer: WireAnswer; ms: number }
  | { kind: 'no-answer'; why: string; received: string; ms: number };

/**
 * Writes the bytes and reads everything the server sends until it closes
 * (every request says Connection: close), or until `withinMs`: a server that
 * neither answers nor closes in time is a hang, reported like a missing
 * answer. Our side stays open: Node's server drops the requests of a
 * connection whose client half-closes, answered or not.
 */
export function exchange(baseUrl: string, request: WireRequest, withinMs: number): Promise<Exchange> {
  const { hostname, port } = new URL(baseUrl);
  const started = performance.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let failure: string | undefined;
    const socket = connect(Number(port), hostname, () => socket.write(Buffer.from(request.bytes, 'latin1')));
    const deadline = setTimeout(() => {
      failure = `no close within ${withinMs} ms`;
      socket.destroy();
    }, withinMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (failure ??= error.code ?? error.message));
    socket.on('close', () => {
      clearTimeout(deadline);
      const ms = Math.round(performance.now() - started);
      const received = Buffer.concat(chunks);
      const answer = parseAnswer(received, request.head);
      // A reset after a whole answer (the server closed on a body it would not read) still answered.
      if (answer && !(failure?.startsWith('no close') ?? false)) resolve({ kind: 'answer', answer, ms });
      else resolve({ kind: 'no-answer', why: failure ?? 'closed without a whole answer', received: received.toString('latin1'), ms });
    });
  });
}

/**
 * The first final answer in `bytes` (after any 100 Continue), or undefined
 * when there is no whole HTTP/1.x answer.
 */
export function parseAnswer(bytes: Buffer, head = false): WireAnswer | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  if (/^HTTP\/1\.[01] 1\d\d/.test(bytes.subarray(0, 12).toString('latin1'))) return parseAnswer(bytes.subarray(headEnd + 4), head);
  const [statusLine, ...lines] = bytes.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
  if (!status) return undefined;
  const headers: Record<string, string[]> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    (headers[line.slice(0, colon).trim().toLowerCase()] ??= []).push(line.slice(colon + 1).trim());
  }
  const rest = bytes.subarray(headEnd + 4);
  if (head) return { status: Number(status[1]), headers, body: '' };
  const body = headers['transfer-encoding']?.some((value) => /chunked/i.test(value))
    ? dechunk(rest)
    : rest.subarray(0, headers['content-length'] ? Number(headers['content-length'][0]) : rest.length);
  if (body === undefined) return undefined;
  if (headers['content-length'] && body.length < Number(headers['content-length'][0])) return undefined;
  return { status: Number(status[1]), headers, body: body.toString('utf8') };
}

function dechunk(bytes: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  for (let at = 0; ; ) {
    const lineEnd = bytes.indexOf('\r\n', at);
    if (lineEnd < 0) return undefined;
    const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1').split(';')[0], 16);
    if (!Number.isFinite(size)) return undefined;
    if (size === 0) return Buffer.concat(parts);
    if (lineEnd + 2 + size > bytes.length) return undefined;
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
