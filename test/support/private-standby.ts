import { setTimeout as delay } from 'node:timers/promises';
import type { PrivatePgBouncer } from './private-pgbouncer';
import { type PrivatePostgres, type PrivateStandby, startPrivatePostgres, startPrivateStandby } from './private-postgres';

/** The standby's application_name, which the primary's synchronous_standby_names lists. */
export const STANDBY_NAME = 'standby';
const SYNC_DEADLINE_MS = 30_000;
const POLL_MS = 50;

/**
 * A private primary and a hot standby that streams its WAL with synchronous
 * replication: every commit waits until the standby has flushed it
 * (synchronous_commit = on with the standby named in
 * synchronous_standby_names), so a commit the primary acknowledged is on the
 * standby's disk too, and a promoted standby holds every acknowledged commit.
 * See docs/scaling.md, "A standby takes over".
 */
export interface ReplicatedPostgres {
  readonly primary: PrivatePostgres;
  readonly standby: PrivateStandby;
  /**
   * The failover, as an operator (or a failover manager) runs it: the primary
   * stopped hard (pg_ctl stop -m immediate, as a crash), the standby
   * promoted, then the bouncer pointed at it. Resolves with when each step
   * ended (epoch ms).
   */
  failOver(bouncer: PrivatePgBouncer): Promise<FailoverSteps>;
  /** Stops both servers and deletes their clusters. */
  destroy(): Promise<void>;
  /** Synchronous, for an exit handler: both servers SIGQUIT and their folders deleted. */
  destroyNow(): void;
}

export interface FailoverSteps {
  primaryStoppedAt: number;
  standbyPromotedAt: number;
  bouncerRetargetedAt: number;
}

export async function startReplicatedPostgres(): Promise<ReplicatedPostgres> {
  const primary = await startPrivatePostgres();
  let standby: PrivateStandby | undefined;
  try {
    standby = await startPrivateStandby(primary, STANDBY_NAME);
    // Only once the copy is made: pg_basebackup copies postgresql.auto.conf,
    // and a promoted standby that named itself its synchronous standby would
    // wait for ever on every commit.
    await primary.configure({ synchronous_standby_names: STANDBY_NAME, synchronous_commit: 'on' });
    await inSync(primary);
  } catch (error) {
    await standby?.destroy();
    await primary.destroy();
    throw error;
  }
  const promoted = standby;
  return {
    primary,
    standby: promoted,
    failOver: async (bouncer) => {
      await primary.stop('immediate');
      const primaryStoppedAt = Date.now();
      await promoted.promote();
      const standbyPromotedAt = Date.now();
      await bouncer.retarget(promoted.port);
      return { primaryStoppedAt, standbyPromotedAt, bouncerRetargetedAt: Date.now() };
    },
    destroy: async () => {
      await Promise.all([primary.destroy(), promoted.destroy()]);
    },
    destroyNow: () => {
      primary.destroyNow();
      promoted.destroyNow();
    },
  };
}

/** Polls pg_stat_replication until the standby streams as the primary's synchronous standby. */
async function inSync(primary: PrivatePostgres): Promise<void> {
  const deadline = Date.now() + SYNC_DEADLINE_MS;
  for (;;) {
    const rows = await primary.query<{ state: string; sync_state: string }>(
      'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
      [STANDBY_NAME],
    );
    if (rows.some((row) => row.state === 'streaming' && row.sync_state === 'sync')) return;
    if (Date.now() > deadline) {
      throw new Error(`standby "${STANDBY_NAME}" not in sync with the primary within ${SYNC_DEADLINE_MS} ms: ${JSON.stringify(rows)}`);
    }
    await delay(POLL_MS);
  }
}
