/** Each e2e file stops what it started; nothing is shared across files but the database. */
export default async function globalTeardown(): Promise<void> {}
