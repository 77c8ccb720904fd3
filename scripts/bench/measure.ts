import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import autocannon from 'autocannon';
import type { BackendCpu, DatabaseCpu } from './database-cpu';
import { cpuMs } from './process-cpu';

/** What one load gives: throughput, latency, failures, and the server's CPU per request. */
export interface Figures {
  requests: number;
  rps: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  max_ms: number;
  errors: number;
  non_2xx: number;
  /** User and system CPU of the server's process over the load, divided by the requests answered. */
  cpu_ms_per_request: number;
  /** The same of the Postgres backends serving the bench's database; null when Postgres is not on this machine. */
  postgres_cpu_ms_per_request: number | null;
}

export interface Target {
  url: string;
  pid: number;
}

/** CPU spent between two samples: a backend new in `after` started in between, so all of its CPU counts. */
export function cpuSpent(before: BackendCpu, after: BackendCpu): number {
  let spent = 0;
  for (const [pid, ms] of after) spent += ms - (before.get(pid) ?? 0);
  return spent;
}

/** Resident memory of a process in MB: all of it, and its anonymous and file-backed parts (/proc/<pid>/status). */
export interface Resident {
  rss_mb: number;
  /** Private memory: the V8 heap, and what native code allocated (buffers, the allocator's arenas, thread stacks). */
  anon_mb: number;
  /** Pages of files mapped in, mostly the node binary: shared by every process running it. */
  file_mb: number;
}

export function residentOf(pid: number): Resident {
  return residentFromStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
}

export function residentFromStatus(status: string): Resident {
  const kb = (field: string) => {
    const line = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!line) throw new Error(`no ${field} in /proc/<pid>/status`);
    return Number(line[1]);
  };
  return { rss_mb: round(kb('VmRSS') / 1024, 1), anon_mb: round(kb('RssAnon') / 1024, 1), file_mb: round(kb('RssFile') / 1024, 1) };
}

/** The V8 heap as the process's own Prometheus metrics report it (prom-client's default metrics), in MB. */
export interface HeapFigures {
  heap_total_mb: number;
  heap_used_mb: number;
  /** Memory held outside the heap by JavaScript objects (Buffers and the like). */
  external_mb: number;
}

export function heapFromMetrics(text: string): HeapFigures {
  const mb = (name: string) => {
    const line = new RegExp(`^${name} (\\d+(?:\\.\\d+)?(?:e\\+\\d+)?)$`, 'm').exec(text);
    if (!line) throw new Error(`no ${name} in the metrics`);
    return round(Number(line[1]) / 2 ** 20, 1);
  };
  return {
    heap_total_mb: mb('nodejs_heap_size_total_bytes'),
    heap_used_mb: mb('nodejs_heap_size_used_bytes'),
    external_mb: mb('nodejs_external_memory_bytes'),
  };
}

export function round(value: number, places = 2): number {
  const scale = 10 ** places;
  return Math.round(value * scale) / scale;
}

export function withNewKey(request: autocannon.Request): autocannon.Request {
  return { ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } };
}

/** autocannon against one server for `seconds`, with its CPU and its database's counted over the same span. */
export async function load(
  target: Target,
  request: autocannon.Request,
  options: { connections: number; seconds: number; databaseCpu?: DatabaseCpu },
): Promise<Figures> {
  const databaseBefore = await options.databaseCpu?.sample();
  const cpuBefore = cpuMs(target.pid);
  const result = await autocannon({
    url: target.url,
    connections: options.connections,
    duration: options.seconds,
    requests: [request],
  });
  const cpu = cpuMs(target.pid) - cpuBefore;
  const databaseAfter = await options.databaseCpu?.sample();
  const perRequest = (ms: number) => (result.requests.total === 0 ? 0 : round(ms / result.requests.total, 3));
  return {
    requests: result.requests.total,
    rps: round(result.requests.average),
    p50_ms: result.latency.p50,
    p90_ms: result.latency.p90,
    p99_ms: result.latency.p99,
    max_ms: result.latency.max,
    errors: result.errors,
    non_2xx: result.non2xx,
    cpu_ms_per_request: perRequest(cpu),
    postgres_cpu_ms_per_request:
      databaseBefore && databaseAfter ? perRequest(cpuSpent(databaseBefore, databaseAfter)) : null,
  };
}

export interface Answer {
  status: number;
  replayed: boolean;
  body: string;
}

/** One request over its own connection (the storm's requests must not queue behind each other in a pool). */
export function send(
  url: string,
  options: { method: string; path: string; headers: Record<string, string>; body?: string; agent?: Agent },
): Promise<Answer> {
  return new Promise((settle, fail) => {
    const request = httpRequest(
      `${url}${options.path}`,
      { method: options.method, headers: options.headers, agent: options.agent, timeout: 30_000 },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          settle({
            status: response.statusCode ?? 0,
            replayed: response.headers['idempotent-replayed'] === 'true',
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        response.on('error', fail);
      },
    );
    request.on('timeout', () => request.destroy(new Error(`${options.method} ${options.path}: no answer in 30 s`)));
    request.on('error', fail);
    request.end(options.body);
  });
}

export interface StormFigures {
  requests: number;
  created: number;
  replays: number;
  in_use: number;
  /** Answers that were none of the three, or a replay whose bytes differ from the created answer. */
  other: number;
  /** How many answers had each status (0: no answer, the connection failed). */
  statuses: Record<string, number>;
  payments: number;
  charges: number;
  first_answer_ms: number;
  last_answer_ms: number;
  /** From the first answer to the last. */
  spread_ms: number;
  /** The latency goal, reported rather than enforced: every answer within 2 s of the first. */
  within_2s: boolean;
  /** One payment, one charge, and every answer the created 201, a byte-equal replay of it, or a 409. */
  ok: boolean;
}

/**
 * `count` requests at once on one key, each on a connection of its own: one
 * payment, one charge, and every answer the created 201, a byte-equal replay
 * of it, or a 409.
 */
export async function storm(
  url: string,
  request: { headers: Record<string, string>; body: string },
  count: number,
  countAfter: () => Promise<{ payments: number; charges: number }>,
): Promise<StormFigures> {
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const headers = { ...request.headers, 'idempotency-key': randomUUID() };
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: count }, () =>
      send(url, { method: 'POST', path: '/v1/payments', headers, body: request.body, agent }).then(
        (answer) => ({ ...answer, at: performance.now() - started }),
        () => ({ status: 0, replayed: false, body: '', at: performance.now() - started }),
      ),
    ),
  );
  agent.destroy();
  const createdBodies = answers.filter((answer) => answer.status === 201 && !answer.replayed).map((answer) => answer.body);
  const replays = answers.filter((answer) => answer.status === 201 && answer.replayed);
  const inUse = answers.filter((answer) => answer.status === 409).length;
  const faithfulReplays = replays.filter((answer) => answer.body === createdBodies[0]).length;
  const other = count - createdBodies.length - faithfulReplays - inUse;
  const statuses: Record<string, number> = {};
  for (const { status } of answers) statuses[status] = (statuses[status] ?? 0) + 1;
  const times = answers.map((answer) => answer.at);
  const first = Math.min(...times);
  const last = Math.max(...times);
  const { payments, charges } = await countAfter();
  return {
    requests: count,
    created: createdBodies.length,
    replays: replays.length,
    in_use: inUse,
    other,
    statuses,
    payments,
    charges,
    first_answer_ms: Math.round(first),
    last_answer_ms: Math.round(last),
    spread_ms: Math.round(last - first),
    within_2s: last - first <= 2_000,
    ok: createdBodies.length === 1 && other === 0 && payments === 1 && charges === 1,
  };
}

export interface SoakFigures {
  seconds: number;
  requests: number;
  rps: number;
  samples: ({ t_s: number } & Resident)[];
  /** Least-squares slope of the samples' RSS. */
  rss_mb_per_min: number;
  /** The same over the second half only: once the caches have filled, whether anything still grows. */
  rss_mb_per_min_second_half: number;
  /** The V8 heap when the load ended, from the server's metrics; null for a server without them. */
  heap_at_end: HeapFigures | null;
}

/** Load for `seconds` while the server's resident memory is read every few seconds. */
export async function soak(
  target: Target & { metricsUrl?: string },
  request: autocannon.Request,
  options: { connections: number; seconds: number },
): Promise<SoakFigures> {
  const everyMs = Math.max(1, Math.min(5, Math.floor(options.seconds / 10))) * 1000;
  const started = performance.now();
  const samples: SoakFigures['samples'] = [];
  const sample = () => samples.push({ t_s: round((performance.now() - started) / 1000, 1), ...residentOf(target.pid) });
  sample();
  const timer = setInterval(sample, everyMs);
  let figures: Figures;
  try {
    figures = await load(target, request, options);
  } finally {
    clearInterval(timer);
  }
  sample();
  const metrics = target.metricsUrl === undefined ? undefined : await fetch(`${target.metricsUrl}/metrics`);
  return {
    seconds: options.seconds,
    requests: figures.requests,
    rps: figures.rps,
    samples,
    rss_mb_per_min: trend(samples),
    rss_mb_per_min_second_half: trend(samples.filter((s) => s.t_s >= options.seconds / 2)),
    heap_at_end: metrics ? heapFromMetrics(await metrics.text()) : null,
  };
}

function trend(samples: SoakFigures['samples']): number {
  return round(slope(samples.map((s) => [s.t_s / 60, s.rss_mb])));
}

function slope(points: [number, number][]): number {
  const n = points.length;
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const covariance = points.reduce((sum, [x, y]) => sum + (x - meanX) * (y - meanY), 0);
  const variance = points.reduce((sum, [x]) => sum + (x - meanX) ** 2, 0);
  return variance === 0 ? 0 : covariance / variance;
}
