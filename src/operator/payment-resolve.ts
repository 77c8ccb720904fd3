import { mainOf } from './resolve-command';

/** `npm run payment:resolve -- --id pay_… --status succeeded|failed --reason "…" [--by NAME]`: see resolve-command.ts. */
mainOf('payment');
