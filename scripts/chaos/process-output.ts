import { mkdir, mkdtemp, readFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseJsonObject } from '../../test/support/processes';

/** How many of the processes' lines on unexpected errors a run with a violation repeats on stderr. */
export const REPEATED_ERROR_LINES = 20;

/** The folder named, made if missing, or a new one in the system's temporary folder. */
export async function outputFolder(named: string | undefined): Promise<string> {
  if (named === undefined) return mkdtemp(join(tmpdir(), 'chaos-'));
  await mkdir(named, { recursive: true });
  return named;
}

/**
 * What the processes' output files say went wrong, for a run with a
 * violation: how many lines each message logged at error level (pino's 50:
 * outages make hundreds of 503s, all expected), then the first `max` lines
 * on an unexpected error (an answer of 500 internal_error, or a fatal one),
 * each after its file's name.
 */
export async function errorLines(outputDir: string, max: number): Promise<string[]> {
  const byMessage = new Map<string, number>();
  const unexpected: string[] = [];
  for (const file of (await readdir(outputDir)).sort()) {
    for (const text of (await readFile(join(outputDir, file), 'utf8')).split('\n')) {
      const line = parseJsonObject(text);
      if (typeof line?.level !== 'number' || line.level < 50) continue;
      const message = `${String(line.msg).slice(0, 60)}${typeof line.code === 'string' ? ` (${line.code})` : ''}`;
      byMessage.set(message, (byMessage.get(message) ?? 0) + 1);
      if (line.level >= 60 || line.code === 'internal_error') unexpected.push(`${file}: ${text}`);
    }
  }
  const counts = [...byMessage].sort(([, a], [, b]) => b - a).map(([message, count]) => `${count} × ${message}`);
  return [
    `error lines in ${outputDir}: ${counts.join('; ') || 'none'}`,
    `${unexpected.length} on an unexpected error${unexpected.length > max ? `, the first ${max}` : ''}:`,
    ...unexpected.slice(0, max),
  ];
}
