import { Controller, Get, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Cluster, Redis } from 'ioredis';
import { ApiAnswers } from '../common/openapi';
import { DataSource } from 'typeorm';
import { TransportError, TransportErrorCode } from '../common/transport-error';

export const HEALTH_REDIS = Symbol('HEALTH_REDIS');
const CHECK_TIMEOUT_MS = 1_000;

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([
    work,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error('timed out')), CHECK_TIMEOUT_MS).unref()),
  ]);
}

@Controller('health')
@ApiTags('operations')
export class HealthController {
  constructor(
    private readonly dataSource: DataSource,
    @Inject(HEALTH_REDIS) private readonly redis: Redis | Cluster,
  ) {}

  /** The process is up and serving HTTP; says nothing about its dependencies. */
  @Get('live')
  @ApiOperation({ summary: 'The process is up' })
  @ApiAnswers({ status: 200, description: '`{"status":"ok"}`' })
  live() {
    return { status: 'ok' };
  }

  /** Ready to take payments: Postgres and Redis both answer. */
  @Get('ready')
  @ApiOperation({ summary: 'Postgres and Redis both answer' })
  @ApiAnswers({ status: 200, description: 'Ready to take payments.' }, { status: 503, description: 'Postgres or Redis unreachable.' })
  async ready() {
    const [postgres, redis] = await Promise.allSettled([
      withTimeout(this.dataSource.query('SELECT 1')),
      withTimeout(this.redis.ping()),
    ]);
    const down = [postgres.status === 'rejected' && 'postgres', redis.status === 'rejected' && 'redis'].filter(Boolean);
    if (down.length > 0) {
      throw new TransportError(TransportErrorCode.ServiceUnavailable, `Not ready: ${down.join(' and ')} unreachable.`);
    }
    return { status: 'ok', checks: { postgres: 'up', redis: 'up' } };
  }
}
