/**
 * Polls until `check` returns a value, or fails at the deadline saying what it
 * waited for. Every test waits for asynchronous work with this, never a sleep.
 * Free of Nest and jest imports, so unit specs can use it too.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 10_000, intervalMs = 50, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
