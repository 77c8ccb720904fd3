import { type BeforeApplicationShutdown, Logger } from '@nestjs/common';
import { errorForLog } from '../common/log-safety';
import type { ClientsRepository } from './clients.repository';

const logger = new Logger('ApiKeyUsage');

/**
 * When each key was last used, kept without a write per request: a use is
 * noted in memory (the latest per key), and the first use after a flush
 * schedules the next one `flushMs` later, which writes every key noted
 * meanwhile in one statement. So a process writes at most once per
 * `flushMs`, whatever its traffic, and not at all while idle; last_used_at
 * lags the truth by up to `flushMs`. A flush that fails is merged back and
 * tried with the next one; a stop (SIGTERM) flushes what is left, a crash
 * loses at most the last `flushMs` of uses.
 */
export class ApiKeyUsage implements BeforeApplicationShutdown {
  private pending = new Map<string, Date>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly clients: Pick<ClientsRepository, 'recordUsage'>,
    private readonly flushMs: number,
  ) {}

  record(keyId: string, at = new Date()): void {
    this.pending.set(keyId, at);
    // Unreferenced: a pending flush never holds a stopping process open (the shutdown hook flushes).
    this.timer ??= setTimeout(() => void this.flush(), this.flushMs).unref();
  }

  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const uses = this.pending;
    this.pending = new Map();
    try {
      await this.clients.recordUsage(uses);
    } catch (error) {
      for (const [keyId, at] of uses) {
        const later = this.pending.get(keyId);
        if (!later || later < at) this.record(keyId, at);
      }
      logger.warn({ msg: 'API key usage not written; kept for the next flush', keys: uses.size, error: errorForLog(error) });
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.flush();
  }
}
