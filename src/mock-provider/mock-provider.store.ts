import { appendFileSync, readFileSync } from 'node:fs';
import type { ChargeRecord } from './mock-provider.types';

/**
 * Charges in memory, keyed by provider idempotency key. With a journal file,
 * each charge is appended as one JSON line before anyone is answered, and the
 * file is replayed on open, so charges survive a restart (or a SIGKILL) of the
 * provider itself. Records never change after insert (a pending charge settles
 * when read), so the journal is append-only.
 *
 * Every method is synchronous on purpose: a caller that checks then inserts
 * without awaiting in between cannot interleave with another request.
 */
export class MockProviderStore {
  private readonly charges = new Map<string, ChargeRecord>();

  private constructor(private readonly journal: string | undefined) {}

  static open(journal?: string): MockProviderStore {
    const store = new MockProviderStore(journal);
    if (journal !== undefined) store.replay(journal);
    return store;
  }

  find(idempotencyKey: string): ChargeRecord | undefined {
    return this.charges.get(idempotencyKey);
  }

  all(): ChargeRecord[] {
    return [...this.charges.values()];
  }

  insert(record: ChargeRecord): void {
    if (this.charges.has(record.idempotency_key)) {
      throw new Error(`A charge is already recorded for key ${record.idempotency_key}`);
    }
    // Written synchronously before the map changes: a charge is never answered
    // (or replayed) unless it is on disk, so a crash cannot forget one.
    if (this.journal !== undefined) appendFileSync(this.journal, `${JSON.stringify(record)}\n`);
    this.charges.set(record.idempotency_key, record);
  }

  private replay(journal: string): void {
    // Creating the file up front makes a bad path fail at start-up, not on the first charge.
    appendFileSync(journal, '');
    const lines = readFileSync(journal, 'utf8').split('\n');
    lines.forEach((line, index) => {
      if (line.trim() === '') return;
      let record: ChargeRecord;
      try {
        record = JSON.parse(line) as ChargeRecord;
      } catch {
        throw new Error(`${journal}:${index + 1} is not a JSON charge record`);
      }
      this.charges.set(record.idempotency_key, record);
    });
  }
}
