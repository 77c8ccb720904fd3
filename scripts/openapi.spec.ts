import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type * as OpenApiScript from './openapi';

jest.setTimeout(60_000);

/**
 * The compiled generator, as `npm run openapi` runs it. Not ./openapi under
 * ts-jest: the document carries what the @nestjs/swagger compiler plugin adds
 * at `nest build` (descriptions from comments, class-validator rules as
 * patterns and bounds), which ts-jest does not apply. `npm test` builds first.
 */
const COMPILED = join(__dirname, '..', 'dist', 'scripts', 'openapi.js');
const ROOT = join(__dirname, '..');

/** Fails, naming the first line that differs, unless the committed file is what the generator writes. */
function expectCommitted(file: string, generated: string): void {
  const committed = readFileSync(file, 'utf8');
  if (committed === generated) return;
  const was = committed.split('\n');
  const now = generated.split('\n');
  let line = 0;
  while (line < Math.max(was.length, now.length) && was[line] === now[line]) line++;
  throw new Error(
    `${relative(ROOT, file)} is not what \`npm run openapi\` generates: run \`npm run build && npm run openapi\` and commit the result.\n` +
      `first difference, line ${line + 1}:\n  committed: ${was[line] ?? '(end of file)'}\n  generated: ${now[line] ?? '(end of file)'}`,
  );
}

/**
 * docs/openapi.json and the client library's types,
 * client/src/generated/api-types.ts, are generated code:
 * regenerated here in memory from the controllers (the app built in preview
 * mode, no server, database or Redis), they must be the committed files.
 */
describe('the generated OpenAPI document and client types', () => {
  let script: typeof OpenApiScript;
  let document: string;

  beforeAll(async () => {
    if (!existsSync(COMPILED)) throw new Error(`${relative(ROOT, COMPILED)} is missing: run \`npm run build\` first (npm test does)`);
    script = jest.requireActual<typeof OpenApiScript>(COMPILED);
    document = await script.currentDocument();
  });

  it('docs/openapi.json is what npm run openapi writes', () => {
    expectCommitted(script.GENERATED.document, document);
  });

  it('client/src/generated/api-types.ts is what npm run openapi writes', async () => {
    expectCommitted(script.GENERATED.types, await script.typesFor(document));
  });
});
