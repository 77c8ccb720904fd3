import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { DomainError } from '../common/domain-error';
import { errorReply } from '../common/error-envelope';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { ApiKeysService } from './api-keys.service';
import { ClientsRepository } from './clients.repository';

const USAGE = `usage: npm run client:key -- --client ID                              add a key to the client
       npm run client:key -- --roll KEY_ID --expires-in-hours H    add a key; the old one works H more hours (0: stops now)
       npm run client:key -- --revoke KEY_ID                       stop the key now
`;

/**
 * `npm run client:key`: prints one JSON line: the new key
 * {"id":"key_…","client","api_key","prefix"} (with "rolled": the old key's id
 * and end, for --roll), or the revoked key as client:list shows it. Exit 0
 * done (revoking a revoked key included), 1 refused (the line is the error
 * envelope, naming the argument at fault; nothing changed), 2 bad arguments.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      client: { type: 'string' },
      roll: { type: 'string' },
      'expires-in-hours': { type: 'string' },
      revoke: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const hours = values['expires-in-hours'];
  const modes = [values.client, values.roll, values.revoke].filter((value) => value !== undefined);
  if (modes.length !== 1 || (values.roll === undefined) !== (hours === undefined)) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    const keys = new ApiKeysService(new ClientsRepository(dataSource));
    const result =
      values.client !== undefined
        ? await keys.add(values.client)
        : values.roll !== undefined
          ? await keys.roll(values.roll, hours!)
          : await keys.revoke(values.revoke!);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    process.stdout.write(`${errorReply(error).body}\n`);
    process.stderr.write(`client:key refused: ${error.message}\n`);
    process.exitCode = 1;
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`client:key failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
