/** What the benches' command lines share. */

/** The integer option `--name`, or an error saying its range. */
export function integerIn(name: string, raw: string, min: number, max: number): number {
  const value = Number(raw);
  if (!(Number.isInteger(value) && value >= min && value <= max)) throw new Error(`--${name} must be an integer in [${min}, ${max}]`);
  return value;
}

/** A bench empties its database (and its queues, named after it): only a name that says whose they are. */
export function benchDatabase(name: string): string {
  if (!/^[a-z0-9_]+$/.test(name) || !name.includes('bench')) {
    throw new Error(`--database must be lower-case letters, digits and _, and contain "bench" (got "${name}")`);
  }
  return name;
}
