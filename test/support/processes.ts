/**
 * The process harness lives in scripts/lib/ so that it also compiles into
 * dist/ for scripts run with plain Node; the e2e specs import it from here.
 */
export * from '../../scripts/lib/processes';
