import { join, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as ClientLibrary from '../../client/src/index.js';

/** The repository root, whether this runs compiled (dist/scripts/lib) or under ts-jest (scripts/lib). */
const ROOT = resolve(__dirname, __dirname.includes(`${sep}dist${sep}`) ? '../../..' : '../..');

/**
 * The client library (@payments-api/client) as a team installs it: the built
 * package, client/dist (`npm run build` builds it), not its sources. It is ES
 * modules and these tools are CommonJS, so it is loaded with import(); its
 * types are those of its sources.
 */
export async function loadClientLibrary(): Promise<typeof ClientLibrary> {
  return (await import(pathToFileURL(join(ROOT, 'client', 'dist', 'index.js')).href)) as typeof ClientLibrary;
}
