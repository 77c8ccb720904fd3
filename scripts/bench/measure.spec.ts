import { cpuSpent, heapFromMetrics, residentFromStatus } from './measure';

describe('cpuSpent', () => {
  it('counts what each backend spent, all of it for a backend that started in between, nothing for one gone', () => {
    const before = new Map([
      [10, 100],
      [11, 50],
      [12, 70],
    ]);
    const after = new Map([
      [10, 130],
      [11, 50],
      [13, 20],
    ]);
    expect(cpuSpent(before, after)).toBe(30 + 0 + 20);
  });
});

describe('residentFromStatus', () => {
  it('reads VmRSS and its anonymous and file-backed parts, in MB', () => {
    const status = 'Name:\tnode\nVmRSS:\t  222692 kB\nRssAnon:\t  160976 kB\nRssFile:\t   61716 kB\nRssShmem:\t       0 kB\n';
    expect(residentFromStatus(status)).toEqual({ rss_mb: 217.5, anon_mb: 157.2, file_mb: 60.3 });
  });
});

describe('heapFromMetrics', () => {
  it('reads the heap from prom-client default metrics, not the per-space series', () => {
    const text = [
      '# HELP nodejs_heap_size_total_bytes Process heap size from Node.js in bytes.',
      'nodejs_heap_size_total_bytes 82579456',
      'nodejs_heap_size_used_bytes 68243328',
      'nodejs_external_memory_bytes 9464769',
      'nodejs_heap_space_size_total_bytes{space="old"} 56803328',
    ].join('\n');
    expect(heapFromMetrics(text)).toEqual({ heap_total_mb: 78.8, heap_used_mb: 65.1, external_mb: 9 });
  });
});
