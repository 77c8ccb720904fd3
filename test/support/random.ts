/** A uniform random source in [0, 1), like Math.random. */
export type Random = () => number;

/**
 * mulberry32: a tiny seeded PRNG (32-bit state), good enough for reproducible
 * tests and simulations; not for anything secret.
 */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
