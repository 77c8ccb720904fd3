/** The mock provider as a child process; see processes.ts for the whole harness. */
export { type Charge, type ProcessExit as ProviderExit, type ProviderProcess, startProvider } from './processes';
