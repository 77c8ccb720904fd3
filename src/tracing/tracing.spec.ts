/**
 * Tracing is off, at no cost, unless OTEL_EXPORTER_OTLP_ENDPOINT is set: not
 * one OpenTelemetry package is loaded, and the helpers the ledger and the
 * worker call are pass-throughs. The e2e spec (test/traces.e2e-spec.ts)
 * covers what it does when on, across the three processes.
 */
const OTEL_PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/context-async-hooks',
  '@opentelemetry/core',
  '@opentelemetry/resources',
  '@opentelemetry/semantic-conventions',
  '@opentelemetry/sdk-trace',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/instrumentation',
  '@opentelemetry/instrumentation-http',
  '@opentelemetry/instrumentation-undici',
];

describe('tracing without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  const loaded: string[] = [];

  beforeEach(() => {
    jest.resetModules();
    loaded.length = 0;
    for (const name of OTEL_PACKAGES) {
      jest.doMock(name, () => {
        loaded.push(name);
        return {};
      });
    }
  });

  afterEach(() => {
    for (const name of OTEL_PACKAGES) jest.dontMock(name);
  });

  function tracingModule(): typeof import('./tracing') {
    return jest.requireActual<typeof import('./tracing')>('./tracing');
  }

  it.each([{}, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }])(
    'starts nothing and loads no OpenTelemetry package with %j',
    async (env) => {
      const tracing = tracingModule();

      expect(tracing.startTracing('payments-api', env)).toBe(false);
      expect(tracing.tracingStarted()).toBe(false);
      expect(tracing.currentTraceparent()).toBeNull();
      await expect(tracing.inSpanUnder('reconcile payment', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', {}, async () => 'done')).resolves.toBe(
        'done',
      );
      await tracing.shutdownTracing();
      expect(loaded).toEqual([]);
    },
  );

  it('loads the packages once the endpoint is set', () => {
    const tracing = tracingModule();
    // The mocks are empty objects: starting fails past the first require, which is all this asks.
    expect(() => tracing.startTracing('payments-api', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toThrow();
    expect(loaded).toContain('@opentelemetry/api');
  });
});
