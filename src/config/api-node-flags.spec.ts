import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_NODE_FLAGS } from './api-node-flags';

const root = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const inJson = API_NODE_FLAGS.map((flag) => JSON.stringify(flag)).join(', ');

describe('API_NODE_FLAGS', () => {
  it("are on package.json's start", () => {
    const { scripts } = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.start).toContain(`node ${API_NODE_FLAGS.join(' ')} `);
    expect(scripts.start).toMatch(/ dist\/src\/main\.js$/);
  });

  it("are on the image's command and compose's api command", () => {
    expect(read('Dockerfile')).toContain(`CMD ["node", ${inJson}, "dist/src/main.js"]`);
    expect(read('docker-compose.yml')).toContain(`command: ["node", ${inJson}, "dist/src/main.js"]`);
  });
});
