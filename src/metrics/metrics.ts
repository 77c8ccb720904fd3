import { Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The process's Prometheus registry, one per process (not prom-client's global
 * one, so several apps in one test process do not collide).
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly paymentAnswers = new Counter({
    name: 'payment_answers_total',
    help: 'Answers of POST /v1/payments by HTTP status and whether they were replays.',
    labelNames: ['status', 'replayed'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}
