/** The parts of a V8 .cpuprofile (what `node --cpu-prof` writes) that the summary reads. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  /** Microseconds before each sample. */
  timeDeltas: number[];
}

/** One line of a view: milliseconds and share of the profile's time. */
export interface Row {
  name: string;
  ms: number;
  pct: number;
}

export interface ProfileSummary {
  total_ms: number;
  /** Bottom-up: where the samples landed, by package; Node's own and native frames are charged to the nearest package that called them. */
  self_by_package: Row[];
  /** Bottom-up: where the samples landed, by function, as they are. */
  self_by_function: Row[];
  /** Top-down: time under each function (everything it called included), each function counted once per sample. */
  total_by_function: Row[];
}

/** Not work: what V8 records when the thread waits or is outside JavaScript. */
const NOT_WORK = new Set(['(idle)', '(program)', '(garbage collector)']);

/** `pg`, `@nestjs/core`, `app:payments/payments.controller.js`, `node:internal`, or '' for a native frame. */
export function packageOf(url: string): string {
  if (url === '') return '';
  // The innermost node_modules: a dependency's own copy of a package is that package.
  const dependency = /.*node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency) return dependency[1];
  if (url.startsWith('node:')) return `node:${url.slice('node:'.length).split('/')[0]}`;
  const ours = /\/dist\/(?:src|scripts)\/(.+)$/.exec(url);
  return ours ? `app:${ours[1]}` : url;
}

function rows(totals: Map<string, number>, totalUs: number, top: number): Row[] {
  return [...totals]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, us]) => ({ name, ms: Math.round(us / 1000), pct: Math.round((1000 * us) / totalUs) / 10 }));
}

function add(totals: Map<string, number>, key: string, us: number): void {
  totals.set(key, (totals.get(key) ?? 0) + us);
}

/**
 * The views one reads a profile by, as numbers: what the process spent its
 * time in, by package and by function (bottom-up), and what each function's
 * calls cost in all (top-down).
 */
export function summarize(profile: CpuProfile, top = 30): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  const label = (id: number) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const where = packageOf(url) || '(native)';
    return NOT_WORK.has(functionName) ? functionName : `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
  };
  const stack = (id: number) => {
    const ids: number[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) ids.push(at);
    return ids;
  };

  let totalUs = 0;
  const selfByPackage = new Map<string, number>();
  const selfByFunction = new Map<string, number>();
  const totalByFunction = new Map<string, number>();
  for (const [id, us] of selfUs) {
    totalUs += us;
    add(selfByFunction, label(id), us);
    const ids = stack(id);
    const { functionName } = byId.get(id)!.callFrame;
    const payer = ids.map((at) => packageOf(byId.get(at)!.callFrame.url)).find((name) => name !== '' && !name.startsWith('node:'));
    add(selfByPackage, NOT_WORK.has(functionName) ? functionName : (payer ?? '(node, called by no package)'), us);
    for (const name of new Set(ids.map(label))) add(totalByFunction, name, us);
  }
  return {
    total_ms: Math.round(totalUs / 1000),
    self_by_package: rows(selfByPackage, totalUs, top),
    self_by_function: rows(selfByFunction, totalUs, top),
    total_by_function: rows(totalByFunction, totalUs, top),
  };
}
