import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { NestFactory } from '@nestjs/core';
import { loadConfigOrExit } from '../config/app-config';
import type { OperationName } from '../ledger/operation';
import { OperatorModule } from './operator.module';
import { ResolutionService } from './resolution.service';

/**
 * `npm run payment:resolve` and `npm run refund:resolve`, one command for
 * each operation: `-- --id … --status succeeded|failed --reason "…" [--by NAME]`
 * resolves a row in review. Prints one JSON line; exits 0 when resolved, 1
 * when refused (the line says why), 2 on bad arguments.
 */
export async function runResolve(operation: OperationName): Promise<void> {
  const prefix = operation === 'payment' ? 'pay' : 're';
  const usage = `usage: npm run ${operation}:resolve -- --id ${prefix}_... --status succeeded|failed --reason "..." [--by NAME]\n`;
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
    process.stdout.write(usage);
    return;
  }
  if (!id || (status !== 'succeeded' && status !== 'failed') || !reason?.trim() || !by.trim()) {
    process.stderr.write(usage);
    process.exit(2);
  }
  const app = await NestFactory.createApplicationContext(OperatorModule.forRoot(loadConfigOrExit()), { logger: false });
  try {
    const result = await app.get(ResolutionService).resolve({ operation, id, status, reason: reason.trim(), by: by.trim() });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exitCode = result.resolved ? 0 : 1;
  } finally {
    await app.close();
  }
}

/** Runs the command for `operation`, failing loudly. */
export function mainOf(operation: OperationName): void {
  runResolve(operation).catch((error: unknown) => {
    process.stderr.write(`${operation}:resolve failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
