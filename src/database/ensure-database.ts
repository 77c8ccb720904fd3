import { Client } from 'pg';

/**
 * Creates the database named in the URL when it does not exist yet, through
 * the server's maintenance database, so a fresh machine needs no manual step.
 */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const admin = new Client({ connectionString: maintenance.toString() });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount !== 0) return false;
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    return true;
  } catch (error) {
    // Another runner created it between our check and our CREATE.
    if ((error as { code?: string }).code === '42P04') return false;
    throw error;
  } finally {
    await admin.end();
  }
}
