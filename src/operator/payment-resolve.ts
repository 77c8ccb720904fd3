import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { NestFactory } from '@nestjs/core';
import { loadConfigOrExit } from '../config/app-config';
import { OperatorModule } from './operator.module';
import { ResolutionService } from './resolution.service';

const USAGE =
  'usage: npm run payment:resolve -- --id pay_... --status succeeded|failed --reason "..." [--by NAME]\n';

/**
 * `npm run payment:resolve -- --id pay_… --status succeeded|failed --reason "…" [--by NAME]`:
 * resolves a payment in review. Prints one JSON line; exits 0 when resolved,
 * 1 when refused (the line says why), 2 on bad arguments.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      id: { type: 'string' },
      status: { type: 'string' },
      reason: { type: 'string' },
      by: { type: 'string', default: 'operator' },
      help: { type: 'boolean', default: false },
    },
  });
  const { id, status, reason, by } = values;
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (!id || (status !== 'succeeded' && status !== 'failed') || !reason?.trim() || !by.trim()) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const app = await NestFactory.createApplicationContext(OperatorModule.forRoot(loadConfigOrExit()), { logger: false });
  try {
    const result = await app.get(ResolutionService).resolve({ paymentId: id, status, reason: reason.trim(), by: by.trim() });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exitCode = result.resolved ? 0 : 1;
  } finally {
    await app.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`payment:resolve failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
