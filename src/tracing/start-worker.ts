// Imported first by the entry point, before anything loads http: see tracing.ts.
import { startTracing } from './tracing';

startTracing('payments-worker');
