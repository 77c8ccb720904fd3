import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Metrics } from './metrics';

/**
 * GET /metrics on a port of its own, and nothing else on that port: the
 * process's figures (payment counts, versions, queue depths) are for whoever
 * can reach the metrics port, never for every API client on the public one.
 * The API serves them on METRICS_PORT, the worker on WORKER_METRICS_PORT.
 */
export class MetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MetricsServer.name);
  private server?: Server;

  constructor(
    private readonly metrics: Metrics,
    private readonly requestedPort: number,
  ) {}

  /** The bound port (requestedPort may be 0: a free one); set once the app has bootstrapped. */
  get port(): number {
    if (!this.server) throw new Error('MetricsServer.port read before the app bootstrapped');
    return (this.server.address() as AddressInfo).port;
  }

  async onApplicationBootstrap(): Promise<void> {
    const server = createServer((request, response) => {
      if (request.method !== 'GET' || request.url !== '/metrics') {
        response.writeHead(404).end();
        return;
      }
      this.metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'Content-Type': this.metrics.registry.contentType }).end(text),
        () => response.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.requestedPort, () => resolve());
    });
    this.server = server;
    this.logger.log({ msg: 'metrics served', port: this.port });
  }

  async onApplicationShutdown(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
