import { mainOf } from './resolve-command';

/** `npm run refund:resolve -- --id re_… --status succeeded|failed --reason "…" [--by NAME]`: see resolve-command.ts. */
mainOf('refund');
