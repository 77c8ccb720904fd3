import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { ApiKeysService } from './api-keys.service';
import { ClientsRepository } from './clients.repository';

const USAGE = 'usage: npm run client:list\n';

/**
 * `npm run client:list`: every client and its keys on one JSON line,
 * {"object":"list","data":[{"id","name","created_at","keys":[{"id","prefix",
 * "status","created_at","last_used_at","expires_at","revoked_at"}]}]}, oldest
 * first. Never a key or its hash: neither can be read back. Read-only.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { help: { type: 'boolean', default: false } } });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    const data = await new ApiKeysService(new ClientsRepository(dataSource)).list();
    process.stdout.write(`${JSON.stringify({ object: 'list', data })}\n`);
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`client:list failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
