import type { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { errorForLog } from './log-safety';

/** A BullMQ job scheduler: one job named `jobName` every `everyMs`. */
export interface JobSchedule {
  id: string;
  everyMs: number;
  jobName: string;
}

/**
 * Upserts a queue's job schedulers and keeps them there. Every worker does
 * this at start; the scheduler ids are fixed, so however many workers run
 * there is one job per interval, taken by one worker.
 *
 * Redis can lose every key (FLUSHALL, a restart without persistence), the
 * schedulers with them, and nothing but an upsert brings a scheduler back:
 * so each worker also checks every `checkEveryMs` that all still exist and
 * re-creates them if not. Checking first, rather than upserting blindly,
 * leaves a live schedule's timing alone.
 */
export class KeptJobSchedulers {
  private watch?: NodeJS.Timeout;
  private checking = false;

  constructor(
    private readonly queue: Queue,
    private readonly schedules: readonly JobSchedule[],
    private readonly checkEveryMs: number,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.upsertAll();
    this.watch = setInterval(() => void this.restoreIfLost(), this.checkEveryMs).unref();
  }

  stop(): void {
    clearInterval(this.watch);
  }

  private async upsertAll(): Promise<void> {
    const done = { removeOnComplete: true, removeOnFail: 100 };
    for (const { id, everyMs, jobName } of this.schedules) {
      await this.queue.upsertJobScheduler(id, { every: everyMs }, { name: jobName, opts: done });
    }
  }

  private async restoreIfLost(): Promise<void> {
    // While Redis is away a check can outlast the interval; one at a time is enough.
    if (this.checking) return;
    this.checking = true;
    try {
      const found = await Promise.all(this.schedules.map(({ id }) => this.queue.getJobScheduler(id)));
      if (found.every(Boolean)) return;
      await this.upsertAll();
      this.logger.warn({ msg: 'job schedulers were missing from Redis: re-created' });
    } catch (error) {
      this.logger.warn({ msg: 'could not check the job schedulers; will retry', err: errorForLog(error) });
    } finally {
      this.checking = false;
    }
  }
}
