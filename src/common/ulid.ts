import { randomFillSync } from 'node:crypto';
import { decodeTime, encodeTime, ulid } from 'ulid';

/** Random bytes drawn from the kernel at once: 256 ids' worth (16 bytes each). */
const POOL_BYTES = 4096;

const pool = new Uint8Array(POOL_BYTES);
let next = POOL_BYTES;

/**
 * One byte of the pool as a fraction in [0, 1), ulid's PRNG shape; ulid
 * turns it into one of 32 characters (each byte value maps to one, 8 to
 * each), so the characters stay uniform. Bytes are used once, then refilled.
 */
function pooledRandom(): number {
  if (next === POOL_BYTES) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++] / 256;
}

/**
 * A ULID (the time in ms, then 80 random bits, Crockford base32) whose
 * randomness comes from the system's CSPRNG 4 KB at a time, as Node's
 * crypto.randomUUID buffers its own. ulid's default generator asks the kernel
 * once per random character, sixteen calls for each id: about 80 µs an id on
 * the development machine, against under 1 µs from the pool, and a create
 * makes two ids (its payment's, its event's), a reconciled payment one.
 */
export function newUlid(): string {
  return ulid(undefined, pooledRandom);
}

/**
 * The smallest ULID of the millisecond `ms`: ULIDs sort by the time they were
 * made, so every one below it was made earlier.
 */
export function firstUlidAt(ms: number): string {
  return `${encodeTime(ms, 10)}${'0'.repeat(16)}`;
}

/**
 * When a ULID was made: the milliseconds its first ten characters carry; NaN
 * for a string of ULID characters whose time is past the largest (a first
 * character above 7), which no generator makes.
 */
export function ulidTime(id: string): number {
  try {
    return decodeTime(id);
  } catch {
    return Number.NaN;
  }
}
