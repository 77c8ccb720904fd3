/** The range and mean of `n` draws, for specs that check a random delay's distribution. */
export function draws(n: number, next: () => number): { min: number; max: number; mean: number } {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const v = next();
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
  }
  return { min, max, mean: sum / n };
}
