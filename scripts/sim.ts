import { loadConfig } from '../src/config/app-config';
import { LAYERS, type LabFigures, OUTAGE, STORM, runLab } from './sim/lab';

/**
 * `npm run sim`: the retry lab's figures as a table; `npm run sim -- --json`:
 * the same figures as one JSON object. See docs/retries.md for what they show.
 */

function table(rows: (string | number)[][]): string {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => String(row[column]).length)));
  const pad = (cell: string | number, column: number) =>
    column === 0 ? String(cell).padEnd(widths[0]) : String(cell).padStart(widths[column]);
  return rows.map((row) => row.map(pad).join('  ')).join('\n');
}

function format(lab: LabFigures): string {
  const { capacity, refund } = loadConfig({}).provider.retryBudget;
  const storm = Object.entries(lab.storm).map(([variant, { calls, ticks }]) => [
    variant,
    Math.round(calls),
    Math.round(ticks),
  ]);
  const outage = (name: string, { first, backend, load }: LabFigures['budget']['with']) => [
    name,
    first,
    backend,
    `${load.toFixed(2)}x`,
  ];
  return [
    `Retry storm: ${STORM.clients} clients, one call served per tick, base ${STORM.baseTicks} ticks, ` +
      `cap ${STORM.capTicks} ticks, mean of ${STORM.runs} seeded runs`,
    table([['backoff', 'calls', 'ticks'], ...storm]),
    '',
    `Retry budget: total outage, ${OUTAGE.requestsPerSecond} requests/s for ${OUTAGE.seconds} s, ` +
      `up to ${OUTAGE.maxRetries} retries each`,
    table([
      ['budget', 'first', 'backend', 'load'],
      outage('without', lab.budget.without),
      outage(`with (${capacity} tokens, refund ${refund})`, lab.budget.with),
    ]),
    '',
    `Layered retries: ${LAYERS.attemptsPerLayer} attempts at each layer, calls reaching the bottom`,
    table([
      ['layers', ...LAYERS.depths],
      ['calls', ...lab.layers],
    ]),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const usage = 'usage: npm run sim [-- --json]\n';
  if (args.includes('--help')) {
    process.stdout.write(usage);
    return;
  }
  if (args.some((arg) => arg !== '--json')) {
    process.stderr.write(usage);
    process.exit(2);
  }
  const lab = await runLab();
  process.stdout.write(args.includes('--json') ? `${JSON.stringify(lab)}\n` : format(lab));
}

void main();
