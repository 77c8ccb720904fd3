import { execFile } from 'node:child_process';

/** How a script's run ended: its exit code (null: killed, by its timeout say) and its output. */
export interface ScriptRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the compiled script `entry` with `args` in a Node process of this
 * one's version, to its end or `timeoutMs`, with `env` (this process's
 * environment when none is given). Never rejects: a failure is in the code.
 */
export function runScript(entry: string, args: string[], options: { timeoutMs: number; env?: NodeJS.ProcessEnv }): Promise<ScriptRun> {
  return new Promise((settle) =>
    execFile(
      process.execPath,
      [entry, ...args],
      { timeout: options.timeoutMs, maxBuffer: 16 * 1024 * 1024, env: options.env },
      (error, stdout, stderr) => settle({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    ),
  );
}
