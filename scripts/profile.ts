import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type CpuProfile, type Row, summarize } from './lib/cpu-profile';

const USAGE = `Usage: npm run profile -- FILE.cpuprofile [--top N] [--json]

Sums a CPU profile (node --cpu-prof, or npm run bench -- --cpu-prof DIR) into
three views (see the README's Performance section):

  self by package    bottom-up: where the samples landed, by dependency (or
                     app:<file> for ours); Node's own and native frames are
                     charged to the nearest package that called them, so a
                     socket write shows under whoever wrote
  self by function   bottom-up: by function, as the samples landed
  total by function  top-down: the time under each function, all it called
                     included (a middleware's includes every later one it
                     called next() into)

The profile covers the process's whole life, start-up included.
  --top N   rows per view (default 30)
  --json    one JSON object instead of the tables
`;

function table(title: string, rows: Row[]): string {
  return [`${title}:`, ...rows.map((row) => `${String(row.ms).padStart(8)} ms ${row.pct.toFixed(1).padStart(5)} %  ${row.name}`)].join('\n');
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '30' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } },
  });
  if (values.help || positionals.length !== 1) {
    process.stdout.write(USAGE);
    if (!values.help) process.exitCode = 1;
    return;
  }
  const top = Number(values.top);
  if (!(Number.isInteger(top) && top > 0)) throw new Error('--top must be a positive integer');
  const summary = summarize(JSON.parse(readFileSync(positionals[0], 'utf8')) as CpuProfile, top);
  process.stdout.write(
    values.json
      ? `${JSON.stringify(summary)}\n`
      : [
          `${summary.total_ms} ms sampled`,
          table('self by package (bottom-up)', summary.self_by_package),
          table('self by function (bottom-up)', summary.self_by_function),
          table('total by function (top-down)', summary.total_by_function),
          '',
        ].join('\n\n'),
  );
}

try {
  main();
} catch (error) {
  process.stderr.write(`profile failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
