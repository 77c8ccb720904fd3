import { appendFileSync, readFileSync } from 'node:fs';
import type { ChargeEvent, ChargeRecord, ListedChargeEvent } from './mock-provider.types';

/**
 * One line of the journal. Journals written before events existed hold bare
 * charge records, one per line, with no `kind`: those still read as charges.
 */
type JournalLine =
  | { kind: 'charge'; charge: ChargeRecord }
  | { kind: 'event'; event: ChargeEvent }
  | { kind: 'delivered'; event_id: string; attempts: number; at: string };

interface HeldEvent {
  event: ChargeEvent;
  delivered: boolean;
  attempts: number;
}

/**
 * Charges and their events in memory, charges keyed by provider idempotency
 * key. With a journal file, each charge, each event and each acknowledged
 * delivery is appended as one JSON line before anything depends on it, and the
 * file is replayed on open, so they survive a restart (or a SIGKILL) of the
 * provider itself. Records never change after insert (a pending charge settles
 * by the clock), so the journal is append-only.
 *
 * Every method is synchronous on purpose: a caller that checks then inserts
 * without awaiting in between cannot interleave with another request.
 */
export class MockProviderStore {
  private readonly charges = new Map<string, ChargeRecord>();
  private readonly events = new Map<string, HeldEvent>();
  /** The last version with an event, per provider key. */
  private readonly versions = new Map<string, number>();

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
    this.write({ kind: 'charge', charge: record });
    this.charges.set(record.idempotency_key, record);
  }

  /** 0 while a charge has no event. */
  lastVersion(providerKey: string): number {
    return this.versions.get(providerKey) ?? 0;
  }

  /** Refuses any version but the next one, so a change is emitted once, in order. */
  recordEvent(event: ChargeEvent): void {
    const { provider_key: key, version } = event.data;
    if (version !== this.lastVersion(key) + 1) {
      throw new Error(`Event version ${version} for key ${key} follows version ${this.lastVersion(key)}`);
    }
    this.write({ kind: 'event', event });
    this.apply({ kind: 'event', event });
  }

  /** Counts one delivery attempt; in memory only, like the attempts themselves. */
  countAttempt(eventId: string): void {
    const held = this.held(eventId);
    if (!held.delivered) held.attempts++;
  }

  /** The first acknowledgement only: a duplicate delivery changes nothing. */
  markDelivered(eventId: string, at: Date): void {
    const held = this.held(eventId);
    if (held.delivered) return;
    const line: JournalLine = { kind: 'delivered', event_id: eventId, attempts: held.attempts, at: at.toISOString() };
    this.write(line);
    this.apply(line);
  }

  /** Oldest first. */
  listEvents(): ListedChargeEvent[] {
    return [...this.events.values()].map(({ event, delivered, attempts }) => ({ ...event, delivered, attempts }));
  }

  undeliveredEvents(): ChargeEvent[] {
    return [...this.events.values()].filter((held) => !held.delivered).map((held) => held.event);
  }

  private held(eventId: string): HeldEvent {
    const held = this.events.get(eventId);
    if (!held) throw new Error(`No event ${eventId}`);
    return held;
  }

  private write(line: JournalLine): void {
    if (this.journal !== undefined) appendFileSync(this.journal, `${JSON.stringify(line)}\n`);
  }

  private apply(line: JournalLine): void {
    switch (line.kind) {
      case 'charge':
        this.charges.set(line.charge.idempotency_key, line.charge);
        return;
      case 'event':
        this.events.set(line.event.id, { event: line.event, delivered: false, attempts: 0 });
        this.versions.set(line.event.data.provider_key, line.event.data.version);
        return;
      case 'delivered': {
        const held = this.held(line.event_id);
        held.delivered = true;
        held.attempts = line.attempts;
        return;
      }
    }
  }

  private replay(journal: string): void {
    // Creating the file up front makes a bad path fail at start-up, not on the first charge.
    appendFileSync(journal, '');
    const lines = readFileSync(journal, 'utf8').split('\n');
    lines.forEach((text, index) => {
      if (text.trim() === '') return;
      try {
        this.apply(parseLine(text));
      } catch (error) {
        throw new Error(`${journal}:${index + 1} is not a journal line: ${(error as Error).message}`, { cause: error });
      }
    });
  }
}

function parseLine(text: string): JournalLine {
  const value = JSON.parse(text) as Partial<JournalLine> | ChargeRecord;
  if (!('kind' in value)) return { kind: 'charge', charge: value as ChargeRecord };
  if (value.kind === 'charge' || value.kind === 'event' || value.kind === 'delivered') return value as JournalLine;
  throw new Error(`unknown kind ${JSON.stringify(value.kind)}`);
}
