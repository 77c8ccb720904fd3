import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The Prometheus alert rules (deploy/prometheus/alerts.yml) are checked and
 * their unit tests (alerts.test.yml: for each alert, series that fire it and
 * series that do not) run with promtool, which scripts/install-test-prerequisites
 * installs. A machine without promtool fails here rather than skip: rules that
 * were never evaluated would pass unnoticed.
 */
const ROOT = join(__dirname, '..');
const RULES = 'deploy/prometheus/alerts.yml';
const TESTS = 'deploy/prometheus/alerts.test.yml';

jest.setTimeout(60_000);

/** promtool's exit status and everything it printed. */
function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8' });
  if (run.error) {
    const missing = (run.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(
      missing
        ? 'promtool is missing (not on the PATH): run scripts/install-test-prerequisites'
        : `promtool could not run: ${run.error.message}`,
    );
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** Fails with promtool's own output unless it exited 0. */
function expectSuccess(args: string[]): void {
  const { status, output } = promtool(...args);
  if (status !== 0) throw new Error(`promtool ${args.join(' ')} exited ${status}:\n${output}`);
}

describe('Prometheus alert rules', () => {
  it('are valid rules (promtool check rules)', () => {
    expectSuccess(['check', 'rules', RULES]);
  });

  it('fire on the series they are for and only on those (promtool test rules)', () => {
    expectSuccess(['test', 'rules', TESTS]);
  });
});
