import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { writeSync } from 'node:fs';
import { Global, Injectable, Module } from '@nestjs/common';
import type { AppConfig, CrashPointName } from '../config/app-config';
import { InjectConfig } from '../config/config.module';

/** Published by undici, behind fetch, once a request's body has been written to the socket. */
const REQUEST_SENT = 'undici:request:bodySent';

/**
 * Fault injection for the crash tests: CRASH_POINT names a phase boundary,
 * CRASH_POINT_SIGNAL what happens there; the configuration refuses
 * CRASH_POINT in production. The services call reach() at each boundary, and
 * unless CRASH_POINT names that boundary it does nothing.
 *
 * At the named boundary the process writes one line saying so, then sends
 * itself the signal. SIGKILL is a crash: nothing after it runs, no finally, no
 * shutdown hook, no reply. SIGSTOP is a stall (a long GC pause, a frozen VM)
 * that lasts until someone sends SIGCONT; the code then carries on from there.
 *
 * during_provider_call does not stop at the line that reaches it but as soon
 * as the next outgoing HTTP request, the provider call that follows, has been
 * written to its socket: the provider has the whole request and records the
 * charge with nobody left to hear the answer.
 */
@Injectable()
export class CrashPoint {
  constructor(@InjectConfig() private readonly config: AppConfig) {}

  reach(point: CrashPointName, context: Record<string, unknown> = {}): void {
    if (point !== this.config.crashPoint.point) return;
    if (point === 'during_provider_call') this.stopOnceRequestSent(point, context);
    else this.stop(point, context);
  }

  private stopOnceRequestSent(point: CrashPointName, context: Record<string, unknown>): void {
    const sent = () => {
      unsubscribe(REQUEST_SENT, sent);
      this.stop(point, context);
    };
    subscribe(REQUEST_SENT, sent);
  }

  private stop(point: CrashPointName, context: Record<string, unknown>): void {
    const { signal } = this.config.crashPoint;
    const line = { msg: 'crash point reached', crashPoint: point, signal, pid: process.pid, ...context };
    // Synchronous, so the line is out before the signal; the harness waits for it.
    writeSync(process.stderr.fd, `${JSON.stringify(line)}\n`);
    process.kill(process.pid, signal);
  }
}

@Global()
@Module({ providers: [CrashPoint], exports: [CrashPoint] })
export class CrashPointModule {}
