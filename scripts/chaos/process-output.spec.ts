import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorLines } from './process-output';

describe('errorLines', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'process-output-spec-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const line = (fields: Record<string, unknown>) => JSON.stringify(fields);

  it('counts error lines by message and repeats only those on an unexpected error, with their file', async () => {
    const internal = line({ level: 50, msg: 'request failed', code: 'internal_error', err: { message: 'boom' } });
    await writeFile(
      join(dir, 'api-1.log'),
      [
        line({ level: 30, msg: 'listening' }),
        line({ level: 50, msg: 'request failed', code: 'service_unavailable' }),
        line({ level: 50, msg: 'request failed', code: 'service_unavailable' }),
        internal,
        'not json',
        '',
      ].join('\n'),
    );
    await writeFile(join(dir, 'worker-2.log'), [line({ level: 60, msg: 'worker failed to start' }), line({ level: 40, msg: 'slow' })].join('\n'));

    const lines = await errorLines(dir, 5);

    expect(lines).toEqual([
      `error lines in ${dir}: 2 × request failed (service_unavailable); 1 × request failed (internal_error); 1 × worker failed to start`,
      '2 on an unexpected error:',
      `api-1.log: ${internal}`,
      `worker-2.log: ${line({ level: 60, msg: 'worker failed to start' })}`,
    ]);
  });

  it('repeats at most max lines and says so; an output without errors says none', async () => {
    const internal = (n: number) => line({ level: 50, msg: 'request failed', code: 'internal_error', n });
    await writeFile(join(dir, 'api-1.log'), [1, 2, 3].map(internal).join('\n'));
    expect(await errorLines(dir, 2)).toEqual([
      `error lines in ${dir}: 3 × request failed (internal_error)`,
      '3 on an unexpected error, the first 2:',
      `api-1.log: ${internal(1)}`,
      `api-1.log: ${internal(2)}`,
    ]);

    await rm(join(dir, 'api-1.log'));
    expect(await errorLines(dir, 2)).toEqual([`error lines in ${dir}: none`, '0 on an unexpected error:']);
  });
});
