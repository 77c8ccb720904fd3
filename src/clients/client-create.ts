import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { ClientsRepository } from './clients.repository';
import { ClientsService } from './clients.service';

/** `npm run client:create -- --name NAME`: prints {"id","name","api_key"} on one line. */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { name: { type: 'string' } } });
  if (!values.name) {
    process.stderr.write('usage: npm run client:create -- --name NAME\n');
    process.exit(2);
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    const client = await new ClientsService(new ClientsRepository(dataSource)).create(values.name);
    process.stdout.write(`${JSON.stringify(client)}\n`);
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`client:create failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
