import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';

/**
 * The package as a user gets it: `npm pack` of client/ (after the root's
 * `npm run build`, which builds client/dist; npm test builds first), installed
 * into an empty project, imported by Node and type-checked by tsc against its
 * `exports`.
 */

jest.setTimeout(60_000);

const CLIENT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = join(CLIENT, '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

interface PackResult {
  filename: string;
  files: { path: string }[];
}

describe('npm pack of client/', () => {
  let work: string;
  let packed: PackResult;

  beforeAll(() => {
    if (!existsSync(join(CLIENT, 'dist', 'index.js'))) {
      throw new Error(`${relative(ROOT, join(CLIENT, 'dist', 'index.js'))} is missing: run \`npm run build\` first (npm test does)`);
    }
    work = mkdtempSync(join(tmpdir(), 'payments-client-pack-'));
    // --ignore-scripts: the tarball of the dist/ the build made, without building again.
    const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: CLIENT, encoding: 'utf8' });
    [packed] = JSON.parse(out) as PackResult[];
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds the built ES modules with their declarations, and no source, spec or config', () => {
    const files = packed.files.map((file) => file.path).sort();

    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/client.js', 'dist/webhooks.d.ts']));
    expect(files.filter((file) => !file.startsWith('dist/') && !['package.json', 'README.md', 'CHANGELOG.md'].includes(file))).toEqual([]);
    expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
    expect(packed.filename).toBe('payments-api-client-0.1.0.tgz');
  });

  it('installs into an empty project with nothing else, and its import and types resolve through exports', () => {
    const project = join(work, 'consumer');
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', join(work, packed.filename)], {
      cwd: project,
      encoding: 'utf8',
    });
    const installed = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(installed.packages).sort()).toEqual(['', 'node_modules/@payments-api/client']);

    const exported = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import('@payments-api/client');
         const api = new m.PaymentsClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'sk_x' });
         console.log(JSON.stringify({ names: Object.keys(m).sort(), resources: Object.keys(api).sort() }));`,
      ],
      { cwd: project, encoding: 'utf8' },
    );
    expect(JSON.parse(exported)).toEqual({
      names: expect.arrayContaining(['ApiError', 'DeclineError', 'NetworkError', 'PaymentsClient', 'PendingAtDeadlineError', 'RefundFailedError', 'WebhookVerificationError', 'verifyWebhook']),
      resources: ['events', 'payments', 'refunds', 'retryBudget', 'webhooks'],
    });

    // A consumer's TypeScript, with DOM's lib for fetch's types and no @types/node: the declarations need no more.
    writeFileSync(
      join(project, 'use.ts'),
      `import { PaymentsClient, DeclineError, type Payment } from '@payments-api/client';
       const api = new PaymentsClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'sk_x', maxRetries: 4, retryBudget: { ratio: 0.1, burst: 10 } });
       export async function pay(): Promise<Payment | undefined> {
         try {
           return await api.payments.create({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok' }, { idempotencyKey: 'k' });
         } catch (error) {
           if (error instanceof DeclineError) return error.payment;
           throw error;
         }
       }
       // @ts-expect-error: a currency the API does not take is a type error
       void api.payments.create({ amount: 500, currency: 'XXX', payment_method: 'pm_card_ok' });\n`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', target: 'es2022', lib: ['es2023', 'dom'], types: [], strict: true, noEmit: true }, files: ['use.ts'] }),
    );
    execFileSync(process.execPath, [TSC, '-p', project], { cwd: project, encoding: 'utf8' });
  });
});
