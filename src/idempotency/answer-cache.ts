import { Injectable } from '@nestjs/common';
import { LRUCache } from 'lru-cache';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import type { StoredResponse } from '../ledger/lease';

/** What a key with its final answer says, for as long as it lives: the request it belongs to, and the answer. */
export interface FinalAnswer {
  fingerprint: string;
  response: StoredResponse;
}

/**
 * Final answers of idempotency keys, kept in this process so that a replay
 * (and a reused key's 422) costs no Postgres round trip. Sound because a key
 * with its final answer never changes until it expires: nothing writes to it
 * but the prune, and a new request may take it over only once expired.
 *
 * An entry must therefore die no later than its key. Postgres decides expiry
 * by its own clock, so entries carry no wall-clock time: each lives for the
 * key's remaining retention as Postgres counted it, measured from before the
 * statement that read or completed the key, on this process's monotonic
 * clock. Clock skew between hosts cannot stretch it.
 */
@Injectable()
export class AnswerCache {
  private readonly answers?: LRUCache<string, FinalAnswer>;

  constructor(@InjectConfig() config: AppConfig) {
    const max = config.idempotency.answerCacheEntries;
    if (max > 0) this.answers = new LRUCache({ max });
  }

  get(clientId: string, key: string): FinalAnswer | undefined {
    return this.answers?.get(entryKey(clientId, key));
  }

  /**
   * `remainingMs`: the key's retention left as Postgres saw it in a statement
   * sent at `askedAt` (performance.now()); the entry lives that long from then.
   */
  remember(clientId: string, key: string, answer: FinalAnswer, remainingMs: number, askedAt: number): void {
    const ttl = Math.floor(remainingMs - (performance.now() - askedAt));
    if (this.answers && ttl > 0) this.answers.set(entryKey(clientId, key), answer, { ttl });
  }
}

/** Keys are printable ASCII: a newline cannot occur in either part. */
function entryKey(clientId: string, key: string): string {
  return `${clientId}\n${key}`;
}
