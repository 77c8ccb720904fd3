// Four projects in `npm test`: unit specs beside the code; database specs
// (*.db-spec.ts) beside the repositories, and in test/database/ those that
// span every feature, against the real Postgres; e2e specs in test/ against
// real Postgres, Redis and a mock-provider process, split in two: e2e, run two
// at a time beside the unit and database files, and e2e-serial, run alone one
// after another. A fifth, scale, runs only with `npm run test:scale`. NestJS 12 ships
// ESM only, which jest loads from these CommonJS test files through
// --experimental-vm-modules.
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
// The client library (client/, "type": "module") imports its modules as
// './x.js', as Node's ES modules need; under jest they are the './x.ts' beside.
// Its specs run as ES modules (jest from '@jest/globals').
const moduleNameMapper = { '^(\\.{1,2}/.*)\\.js$': '$1' };

// e2e files whose assertions rest on how fast processes run beside one
// another: latency and elapsed-time bounds, a lease, a timeout or a pending
// charge's settling racing the next step, kills mid-request, runs that draw
// as many cases as their time allows, measurements. Sharing two cores with
// another file would make them slower and flakier, so they run alone (the
// e2e-serial project, after or before the rest), one after another.
const serialE2e = [
  'api-keys', // a revoked key refused on every API process within 2 s
  'bench',
  'chaos',
  'client', // 200 payments through a failing provider and an API crash
  'client-budget',
  'crash-recovery', // kills and stalls at crash points, past 1.5 s leases
  'fuzz', // draws until its time is up
  'infrastructure-faults',
  'key-retention', // a key's expiry against a charge settling later
  'merchant-events', // 500 ms webhook timeouts, a horizon
  'mock-provider', // replies within 300 ms, latencies
  'model', // draws until its time is up
  'multi-process',
  'observability', // a retry racing the request that holds its key
  'refund-crashes',
  'resilience', // a retry about a second later, fail-fast bounds
  'retention', // reads before the retention horizon
  'review', // 202 meanwhile, before a charge settles
  'traces', // a lease and a timeout against a settling charge
].map((name) => `<rootDir>/test/${name}.e2e-spec.ts`);

/** @type {import('jest').Config} */
module.exports = {
  // Two workers, as CI's machine has two cores. Each worker has a database of
  // its own (test/support/test-env.ts), and every file a queue prefix and
  // ports of its own, so files in two workers share no state.
  maxWorkers: 2,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/client/**/*.spec.ts', '<rootDir>/scripts/**/*.spec.ts', '<rootDir>/test/support/**/*.spec.ts'],
    },
    {
      // The statements the guarantees rest on, beside their repositories, run
      // against the real migrated test database.
      displayName: 'database',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/src/**/*.db-spec.ts', '<rootDir>/test/database/**/*.db-spec.ts'],
      globalSetup: '<rootDir>/test/global-setup.ts',
    },
    {
      // Two at a time, beside the unit and database files.
      displayName: 'e2e',
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...serialE2e],
      globalSetup: '<rootDir>/test/global-setup.ts',
    },
    {
      // Alone: the serial runner runs them in the jest process one after
      // another, while no other file runs (see serialE2e).
      displayName: 'e2e-serial',
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      testMatch: serialE2e,
      runner: '<rootDir>/test/serial-runner.js',
      globalSetup: '<rootDir>/test/global-setup.ts',
    },
    {
      // Past one machine: traffic through a private PgBouncer in transaction
      // pooling mode, and through a private Redis Cluster that loses a primary.
      // Minutes of real processes, so apart from npm test (see docs/scaling.md).
      displayName: 'scale',
      testEnvironment: 'node',
      transform,
      testMatch: ['<rootDir>/test/scale/**/*.scale-spec.ts'],
      globalSetup: '<rootDir>/test/global-setup.ts',
    },
  ],
};
