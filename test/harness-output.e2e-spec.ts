import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startProvider } from './support/processes';

/**
 * The harness writes each child's output to a file when told a folder (the
 * chaos run's --output-dir). Writing it must never cost the run: a file that
 * cannot be written stops, and the child, its kept lines and its exit carry on.
 */
describe('a child process’s output file', () => {
  it('is written whole, and read back after the child has exited', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'harness-output-'));
    try {
      const provider = await startProvider({}, { outputDir: folder });
      await provider.stop();

      const [file] = await readdir(folder);
      expect(file).toBe(`provider-${provider.pid}.log`);
      const written = (await readFile(join(folder, file), 'utf8')).trimEnd().split('\n');
      expect(written).toEqual(provider.output());
      expect(written.length).toBeGreaterThan(0);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });

  it('stops being written when it cannot be, and the child runs and exits as ever', async () => {
    const provider = await startProvider({}, { outputDir: join(tmpdir(), 'harness-output-no-such-folder', String(process.pid)) });

    expect(await (await fetch(`${provider.url}/health`)).json()).toBeDefined();
    expect(await provider.stop()).toMatchObject({ signal: null });
    expect(provider.output()).toContainEqual(expect.stringMatching(/^\(provider's output file: ENOENT/));
  });
});
