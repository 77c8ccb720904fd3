import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Metrics } from '../src/metrics/metrics';

/**
 * The Grafana dashboard (deploy/grafana/payments-dashboard.json) against the
 * code: every query is valid PromQL (promtool checks them as recording
 * rules), names only metrics the API or the worker exports, and the
 * safety net's metrics all have a panel. A renamed metric fails here rather
 * than leave an empty panel.
 */
const ROOT = join(__dirname, '..');
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'payments-dashboard.json');

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { uid: string; panels: Panel[] };
const queries = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));

/** Every series name the metrics registry exports, histograms with their suffixes. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = await new Metrics().registry.getMetricsAsJSON();
  return new Set(
    metrics.flatMap(({ name, type }) =>
      String(type) === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name],
    ),
  );
}

/** The metric names an expression selects: identifiers outside label matchers and grouping clauses, not functions. */
function selectedMetrics(expr: string): string[] {
  const bare = expr
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(by|without)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  return [...bare.matchAll(/\b([a-z_][a-z0-9_]*)\b(?!\s*\()/g)]
    .map((match) => match[1])
    .filter((name) => name.includes('_') && !/^\d/.test(name));
}

describe('the Grafana dashboard', () => {
  it('has queries, each a valid PromQL expression (promtool check rules)', () => {
    expect(queries.length).toBeGreaterThan(10);
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-'));
    try {
      const rules = queries.map(({ expr }, index) => `      - record: dashboard:query_${index}\n        expr: ${JSON.stringify(expr)}`);
      writeFileSync(join(dir, 'rules.yml'), `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
      const run = spawnSync('promtool', ['check', 'rules', join(dir, 'rules.yml')], { encoding: 'utf8' });
      if (run.error) throw new Error(`promtool could not run (scripts/install-test-prerequisites installs it): ${run.error.message}`);
      expect({ status: run.status, output: `${run.stdout}${run.stderr}` }).toMatchObject({ status: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('selects only metrics the processes export', async () => {
    const exported = await exportedNames();
    const unknown = queries.flatMap(({ panel, expr }) =>
      selectedMetrics(expr)
        .filter((name) => !exported.has(name))
        .map((name) => `${panel}: ${name}`),
    );
    expect(unknown).toEqual([]);
  });

  it('shows every metric of the safety net', () => {
    const shown = new Set(queries.flatMap(({ expr }) => selectedMetrics(expr)));
    for (const name of [
      'payments_pending',
      'payments_oldest_pending_age_seconds',
      'payments_requires_review',
      'refunds_pending',
      'refunds_requires_review',
      'reconcile_outcomes_total',
      'webhook_deliveries_pending',
      'webhook_oldest_pending_age_seconds',
      'queue_jobs',
      'idempotency_conflicts_total',
    ]) {
      expect(shown).toContain(name);
    }
  });
});
