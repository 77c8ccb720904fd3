// Three projects in `npm test`: unit specs beside the code; database specs
// (*.db-spec.ts) beside the repositories, and in test/database/ those that
// span every feature, against the real Postgres; e2e specs
// in test/ against real Postgres, Redis and a mock-provider process. A fourth,
// scale, runs only with `npm run test:scale`. NestJS 12 ships
// ESM only, which jest loads from these CommonJS test files through
// --experimental-vm-modules.
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] };
// The client library (client/, "type": "module") imports its modules as
// './x.js', as Node's ES modules need; under jest they are the './x.ts' beside.
// Its specs run as ES modules (jest from '@jest/globals').
const moduleNameMapper = { '^(\\.{1,2}/.*)\\.js$': '$1' };

/** @type {import('jest').Config} */
module.exports = {
  // e2e files share one database and one provider, so files run one after another.
  maxWorkers: 1,
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
      displayName: 'e2e',
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
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
