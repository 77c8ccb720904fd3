import { performance } from 'node:perf_hooks';
import { duplicateKey } from '../src/common/json-body';

/**
 * `node dist/scripts/json-body-bench.js`: what the duplicate-key pass costs
 * beside JSON.parse, on three bodies: a typical payment, one with every field
 * at its limit, and 64 KB of short keys. Prints one JSON line of medians in
 * microseconds per body, over 9 rounds.
 */
const ROUNDS = 9;

const metadata = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`key_${String(i).padStart(36, '0')}`, 'v'.repeat(500)]));
const bodies: Record<string, string> = {
  payment: JSON.stringify({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok', order_id: 'ord_77', metadata: { cart: '42' } }),
  at_limits: JSON.stringify({
    amount: 99_999_999,
    currency: 'USD',
    payment_method: 'p'.repeat(255),
    order_id: 'o'.repeat(64),
    description: 'd'.repeat(500),
    metadata,
  }),
  short_keys_64kb: JSON.stringify(Object.fromEntries(Array.from({ length: 4_900 }, (_, i) => [`k${i}`, i]))),
};

function medianMicros(work: () => unknown, repetitions: number): number {
  const perRound: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    for (let i = 0; i < repetitions; i++) work();
    perRound.push(((performance.now() - started) * 1_000) / repetitions);
  }
  perRound.sort((a, b) => a - b);
  return Number(perRound[Math.floor(ROUNDS / 2)].toFixed(2));
}

const figures = Object.fromEntries(
  Object.entries(bodies).map(([name, text]) => {
    const repetitions = Math.max(20, Math.floor(2_000_000 / text.length));
    if (duplicateKey(text) !== undefined) throw new Error(`${name} has a duplicate key`);
    return [
      name,
      {
        bytes: text.length,
        duplicate_key_us: medianMicros(() => duplicateKey(text), repetitions),
        json_parse_us: medianMicros(() => JSON.parse(text), repetitions),
      },
    ];
  }),
);
process.stdout.write(`${JSON.stringify(figures)}\n`);
