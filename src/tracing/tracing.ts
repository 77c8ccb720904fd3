/**
 * OpenTelemetry traces, on only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
 *
 * Each process starts this first thing (the start-*.ts side-effect modules,
 * imported before anything else), so the http instrumentation is in place
 * before express and Nest load `http`. Without the variable nothing of
 * OpenTelemetry is loaded: the packages are required here lazily, and every
 * helper below is then a plain pass-through.
 *
 * What it does when on: server spans for every request the API and the mock
 * provider answer (instrumentation-http), client spans for every fetch
 * (instrumentation-undici), which also writes the W3C `traceparent` header,
 * so the trace crosses API → provider and provider event → API. The job hop
 * is the ledger's: see currentTraceparent and inSpanUnder, and
 * docs/operations.md#traces.
 */
import type * as Api from '@opentelemetry/api';
import { tracingConfig } from '../config/app-config';

interface Tracing {
  api: typeof Api;
  tracer: Api.Tracer;
  /** A context in which nothing is traced and no trace context is sent (@opentelemetry/core's). */
  suppressTracing(context: Api.Context): Api.Context;
  shutdown(): Promise<void>;
}

let active: Tracing | undefined;

/** Requests that only say the process is alive, not part of any payment's story. */
const UNTRACED_PATHS = /^\/(metrics|health)(\/|\?|$)/;

/**
 * Starts tracing for this process under `serviceName` when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set; says whether it did. A malformed
 * value starts nothing here: loadConfigOrExit then stops the process with
 * the line that names the variable.
 */
export function startTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (active) return true;
  let config: ReturnType<typeof tracingConfig>;
  try {
    config = tracingConfig(env);
  } catch {
    return false;
  }
  const { endpoint, scheduleDelayMs } = config;
  if (endpoint === undefined) return false;

  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only when tracing is on */
  const api = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } =
    require('@opentelemetry/context-async-hooks') as typeof import('@opentelemetry/context-async-hooks');
  const { W3CTraceContextPropagator, suppressTracing } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
  const { resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
  const { ATTR_SERVICE_NAME } =
    require('@opentelemetry/semantic-conventions') as typeof import('@opentelemetry/semantic-conventions');
  const { BatchSpanProcessor, TracerProvider } = require('@opentelemetry/sdk-trace') as typeof import('@opentelemetry/sdk-trace');
  const { OTLPTraceExporter } =
    require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http');
  const { registerInstrumentations } =
    require('@opentelemetry/instrumentation') as typeof import('@opentelemetry/instrumentation');
  const { HttpInstrumentation } =
    require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { UndiciInstrumentation } =
    require('@opentelemetry/instrumentation-undici') as typeof import('@opentelemetry/instrumentation-undici');
  /* eslint-enable @typescript-eslint/no-require-imports */

  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: `${endpoint}/v1/traces` }),
        scheduledDelayMillis: scheduleDelayMs,
      }),
    ],
  });
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  api.trace.setGlobalTracerProvider(provider);
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({ ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.test(request.url ?? '') }),
      new UndiciInstrumentation(),
    ],
  });
  active = { api, tracer: provider.getTracer(serviceName), suppressTracing, shutdown: () => provider.shutdown() };
  return true;
}

/** Whether this process exports traces. */
export function tracingStarted(): boolean {
  return active !== undefined;
}

/**
 * The W3C traceparent of the span now active, to be stored with what outlives
 * the request (a payment's row), or null when tracing is off or no span is active.
 */
export function currentTraceparent(): string | null {
  if (!active) return null;
  const carrier: Record<string, string> = {};
  active.api.propagation.inject(active.api.context.active(), carrier);
  return carrier.traceparent ?? null;
}

/**
 * Runs `work` in a span named `name`, the child of the stored `traceparent`
 * when there is one (else of whatever is active), so the work joins the trace
 * of the request it finishes. Without tracing, just runs `work`.
 */
export async function inSpanUnder<T>(
  name: string,
  traceparent: string | null | undefined,
  attributes: Record<string, string>,
  work: () => Promise<T>,
): Promise<T> {
  if (!active) return work();
  const { api, tracer } = active;
  const parent = traceparent ? api.propagation.extract(api.context.active(), { traceparent }) : api.context.active();
  return tracer.startActiveSpan(name, { kind: api.SpanKind.INTERNAL, attributes }, parent, async (span) => {
    try {
      return await work();
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: api.SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs `work` with our traces kept to ourselves: a request it sends carries
 * no `traceparent` and makes no span. For calls to another party (a
 * merchant's webhook endpoint), for whom our trace ids are neither meant nor
 * useful, and whose own tracing should not join our traces. Without tracing,
 * just runs `work`.
 */
export function outsideTraces<T>(work: () => Promise<T>): Promise<T> {
  if (!active) return work();
  const { api, suppressTracing } = active;
  return api.context.with(suppressTracing(api.context.active()), work);
}

/** Ends tracing: the spans still buffered are exported first. Idempotent. */
export async function shutdownTracing(): Promise<void> {
  const tracing = active;
  active = undefined;
  await tracing?.shutdown();
}
