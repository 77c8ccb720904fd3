import { appendFileSync, readFileSync } from 'node:fs';
import { objectOf } from './mock-provider.events';
import type { ChargeRecord, EventObject, ListedProviderEvent, ProviderEvent, RefundRecord } from './mock-provider.types';

/**
 * One line of the journal. Journals written before events existed hold bare
 * charge records, one per line, with no `kind`: those still read as charges.
 */
type JournalLine =
  | { kind: 'charge'; charge: ChargeRecord }
  | { kind: 'refund'; refund: RefundRecord }
  | { kind: 'event'; event: ProviderEvent }
  | { kind: 'delivered'; event_id: string; attempts: number; at: string };

const KINDS: readonly JournalLine['kind'][] = ['charge', 'refund', 'event', 'delivered'];

interface HeldEvent {
  event: ProviderEvent;
  delivered: boolean;
  attempts: number;
}

/**
 * Charges, refunds and their events in memory, charges and refunds each keyed
 * by their provider idempotency key. With a journal file, each charge, each
 * refund, each event and each acknowledged
 * delivery is appended as one JSON line before anything depends on it, and the
 * file is replayed on open, so they survive a restart (or a SIGKILL) of the
 * provider itself. Records never change after insert (a pending charge or
 * refund settles by the clock), so the journal is append-only.
 *
 * Every method is synchronous on purpose: a caller that checks then inserts
 * without awaiting in between cannot interleave with another request.
 */
export class MockProviderStore {
  private readonly charges = new Map<string, ChargeRecord>();
  /** Provider key by charge id: a refund names its charge by id. */
  private readonly chargeKeys = new Map<string, string>();
  private readonly refunds = new Map<string, RefundRecord>();
  /** Each charge's refunds, by charge id, oldest first. */
  private readonly refundsByCharge = new Map<string, RefundRecord[]>();
  private readonly events = new Map<string, HeldEvent>();
  /** The last version with an event, per object and provider key. */
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

  findChargeById(chargeId: string): ChargeRecord | undefined {
    const key = this.chargeKeys.get(chargeId);
    return key === undefined ? undefined : this.charges.get(key);
  }

  insert(record: ChargeRecord): void {
    this.insertOnce(this.charges, record.idempotency_key, { kind: 'charge', charge: record });
  }

  findRefund(idempotencyKey: string): RefundRecord | undefined {
    return this.refunds.get(idempotencyKey);
  }

  allRefunds(): RefundRecord[] {
    return [...this.refunds.values()];
  }

  /** The refunds of one charge (by its id), oldest first. */
  refundsOf(chargeId: string): RefundRecord[] {
    return [...(this.refundsByCharge.get(chargeId) ?? [])];
  }

  insertRefund(record: RefundRecord): void {
    this.insertOnce(this.refunds, record.idempotency_key, { kind: 'refund', refund: record });
  }

  /** 0 while a charge (or a refund) has no event. */
  lastVersion(object: EventObject, providerKey: string): number {
    return this.versions.get(versionKey(object, providerKey)) ?? 0;
  }

  /** Refuses any version but the next one, so a change is emitted once, in order. */
  recordEvent(event: ProviderEvent): void {
    const { provider_key: key, version } = event.data;
    const last = this.lastVersion(objectOf(event), key);
    if (version !== last + 1) {
      throw new Error(`Event version ${version} for ${objectOf(event)} key ${key} follows version ${last}`);
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
  listEvents(): ListedProviderEvent[] {
    return [...this.events.values()].map(({ event, delivered, attempts }) => ({ ...event, delivered, attempts }));
  }

  undeliveredEvents(): ProviderEvent[] {
    return [...this.events.values()].filter((held) => !held.delivered).map((held) => held.event);
  }

  private held(eventId: string): HeldEvent {
    const held = this.events.get(eventId);
    if (!held) throw new Error(`No event ${eventId}`);
    return held;
  }

  private insertOnce(held: Map<string, unknown>, key: string, line: JournalLine & { kind: 'charge' | 'refund' }): void {
    if (held.has(key)) throw new Error(`A ${line.kind} is already recorded for key ${key}`);
    // Written synchronously before the maps change: a record is never answered
    // (or replayed) unless it is on disk, so a crash cannot forget one.
    this.write(line);
    this.apply(line);
  }

  private write(line: JournalLine): void {
    if (this.journal !== undefined) appendFileSync(this.journal, `${JSON.stringify(line)}\n`);
  }

  private apply(line: JournalLine): void {
    switch (line.kind) {
      case 'charge':
        this.charges.set(line.charge.idempotency_key, line.charge);
        this.chargeKeys.set(line.charge.id, line.charge.idempotency_key);
        return;
      case 'refund': {
        this.refunds.set(line.refund.idempotency_key, line.refund);
        const ofCharge = this.refundsByCharge.get(line.refund.charge) ?? [];
        this.refundsByCharge.set(line.refund.charge, [...ofCharge, line.refund]);
        return;
      }
      case 'event':
        this.events.set(line.event.id, { event: line.event, delivered: false, attempts: 0 });
        this.versions.set(versionKey(objectOf(line.event), line.event.data.provider_key), line.event.data.version);
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
  if (KINDS.includes(value.kind as JournalLine['kind'])) return value as JournalLine;
  throw new Error(`unknown kind ${JSON.stringify(value.kind)}`);
}

/** Charges and refunds keep their versions apart, whatever keys callers choose. */
function versionKey(object: EventObject, providerKey: string): string {
  return `${object}:${providerKey}`;
}
