import { type CpuProfile, packageOf, summarize } from './cpu-profile';

const APP = 'file:///srv/api/dist/src/payments/payments.controller.js';
const PG = 'file:///srv/api/node_modules/pg/lib/client.js';

/** root → controller → pg.query → writev (native); root → (idle). */
const PROFILE: CpuProfile = {
  nodes: [
    { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [2, 5] },
    { id: 2, callFrame: { functionName: 'get', url: APP, lineNumber: 9 }, children: [3] },
    { id: 3, callFrame: { functionName: 'query', url: PG, lineNumber: 99 }, children: [4] },
    { id: 4, callFrame: { functionName: 'writev', url: '', lineNumber: -1 } },
    { id: 5, callFrame: { functionName: '(idle)', url: '', lineNumber: -1 } },
  ],
  samples: [2, 3, 4, 4, 5],
  timeDeltas: [1_000, 2_000, 3_000, 3_000, 1_000],
};

describe('summarize', () => {
  const summary = summarize(PROFILE);

  it('charges a native frame to the package that called it, bottom-up', () => {
    expect(summary.total_ms).toBe(10);
    expect(summary.self_by_package).toEqual([
      { name: 'pg', ms: 8, pct: 80 },
      { name: 'app:payments/payments.controller.js', ms: 1, pct: 10 },
      { name: '(idle)', ms: 1, pct: 10 },
    ]);
    expect(summary.self_by_function[0]).toEqual({ name: 'writev (native):0', ms: 6, pct: 60 });
  });

  it('counts everything a function called in its total, top-down', () => {
    expect(summary.total_by_function.slice(0, 3)).toEqual([
      { name: '(root) (native):0', ms: 10, pct: 100 },
      { name: 'get app:payments/payments.controller.js:10', ms: 9, pct: 90 },
      { name: 'query pg:100', ms: 8, pct: 80 },
    ]);
  });
});

describe('packageOf', () => {
  it.each([
    ['file:///a/node_modules/@nestjs/core/router/x.js', '@nestjs/core'],
    ['file:///a/node_modules/pg/node_modules/pg-protocol/y.js', 'pg-protocol'],
    ['node:internal/streams/writable', 'node:internal'],
    ['file:///a/dist/scripts/bench/stub-provider.js', 'app:bench/stub-provider.js'],
    ['', ''],
  ])('%s is %s', (url, name) => expect(packageOf(url)).toBe(name));
});
