import { PaymentsClient } from '../client/src/index.js';
import { BUDGET, type FleetOptions, formatTable, runFleet } from './client-budget';

/**
 * The budget figures of `npm run client:budget`, with the API replaced by a
 * fetch that answers every request 503 (Retry-After: 1, as the real API
 * answers with its database down) under jest's fake timers: the fleet model
 * alone, in milliseconds. test/client-budget.e2e-spec.ts runs the script on
 * the real stack.
 */

const dead: typeof fetch = async () =>
  new Response(JSON.stringify({ error: { type: 'api_error', code: 'service_unavailable', message: 'down' } }), {
    status: 503,
    headers: { 'content-type': 'application/json', 'retry-after': '1' },
  });

const target = { baseUrl: 'http://api.test', apiKey: 'sk_test', fetch: dead };
/** The e2e's fleet: jest's fake clock slows down with thousands of timers pending, so the specs keep fleets this small. */
const SMALL = { clients: 4, operations: 150, seconds: 5, maxRetries: 3 };

jest.setTimeout(30_000);

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

async function fleet(options: FleetOptions, budget: typeof BUDGET | false) {
  const run = runFleet(PaymentsClient, target, options, budget);
  await jest.runAllTimersAsync();
  return run;
}

describe('a fleet of clients facing an API that answers only 503', () => {
  it('sends 1 + maxRetries requests per payment without a budget, every call given up loudly', async () => {
    const run = await fleet(SMALL, false);

    expect(run).toMatchObject({ first: 600, requests: 2_400, load: 4, answers: { 503: 2_400 }, gaveUp: { max_retries: 600 }, silent: 0 });
    expect(await fleet({ ...SMALL, maxRetries: 5 }, false)).toMatchObject({ requests: 3_600, load: 6 });
  });

  it.each([
    SMALL,
    { clients: 1, operations: 1_000, seconds: 20, maxRetries: 4 },
    { clients: 10, operations: 50, seconds: 5, maxRetries: 3 },
  ])('sends about 1 + ratio + burst/M with the budget: %j', async (options) => {
    const bound = 1 + BUDGET.ratio + BUDGET.burst / options.operations;

    const run = await fleet(options, BUDGET);

    expect(run.first).toBe(options.clients * options.operations);
    expect(run.load).toBeLessThanOrEqual(bound);
    // Each instance's last tokens, under one each, may go unspent.
    expect(run.load).toBeGreaterThan(bound - 2 / options.operations);
    expect(run).toMatchObject({ gaveUp: { budget_exhausted: run.first }, silent: 0 });
  });

  it('prints the table as the seeds print theirs', async () => {
    const without = await fleet(SMALL, false);
    const withBudget = await fleet(SMALL, BUDGET);

    const lines = formatTable(SMALL, without, withBudget).split('\n');

    expect(lines.slice(0, 4)).toEqual([
      'Client retry budget: 4 clients x 150 payments over 5 s each, an API whose every answer is 503, up to 3 retries each',
      'budget                         first  requests    load',
      'without                          600      2400   4.00x',
      'with (burst 10, ratio 0.1)       600       696   1.16x',
    ]);
    expect(lines).toContain('expected: without 1 + maxRetries = 4.00x; with at most 1 + ratio + burst/M = 1.17x');
  });
});
