import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { Connection, Pool, PoolClient, Submittable } from 'pg';
import { endsSession, holdConnection } from './held-connection';

/**
 * After a statement's function could not be made, the next try waits this
 * long, doubled at each failure up to RETRY_AFTER_MAX_MS: an outage is
 * waited out, and a function that can never be made (no CREATE privilege)
 * costs a try and a warning every few minutes, not at every run.
 */
const RETRY_AFTER_MS = 1_000;
const RETRY_AFTER_MAX_MS = 300_000;
/** A making that takes longer (a lock waited on, a connection gone silent) is given up, its connection closed. */
const MAKE_TIMEOUT_MS = 30_000;
/**
 * Bumped whenever what a function is made of changes (the template below):
 * a function made by an older template is then never taken for a new one.
 */
const TEMPLATE_VERSION = 1;

/**
 * Plan-once statements (see StatementOptions in ./sql.ts) kept as
 * server-side functions, for a transaction-pooling PgBouncer that cannot
 * carry a prepared statement from one transaction to the next (1.18, Debian
 * 12's). A PL/pgSQL function's statements are prepared by each server
 * connection the first time it runs them, and their plans are kept there for
 * the connection's life, whichever client the pooler lends it to: after five
 * runs, one generic plan, as for a named statement. The call itself is sent
 * unnamed, and planning a function call is cheap.
 *
 * The function is made from the statement as the code builds it, after its
 * first use in this process (see callFor): Postgres describes the statement
 * (its parameters' and its columns' types, as for any prepared statement),
 * and
 *
 *   CREATE FUNCTION stmt_<hash>(<parameter types>)
 *     RETURNS TABLE (r1 <type>, r2 <type>, …) LANGUAGE plpgsql AS
 *     'BEGIN FOR r1, r2, … IN <statement> LOOP RETURN NEXT; END LOOP; END'
 *
 * is called as `SELECT r1 AS "<column>", … FROM stmt_<hash>($1, …)`. The
 * statement runs as written, its `$n` now the function's arguments; its
 * errors (SQLSTATE, constraint) are the statement's own. Each column is
 * assigned to its output variable rather than returned with RETURN QUERY,
 * which wants the declared types exactly, while a description gives a
 * domain column as its base type.
 *
 * The name is a hash of the whole definition (the statement's text, the
 * types Postgres gave it, the template): a function, once made, never
 * changes, and one of that name is used only if it is the expected one. A
 * new statement text (a new release) or a migration that retypes a column
 * it touches makes a new function beside the old one, so processes of two
 * releases run side by side; an old release's functions stay behind (see
 * docs/scaling.md). Making one needs the CREATE privilege on the schema the
 * tables are in. A statement whose columns a function cannot return as
 * they are (none, a row type, `record`) is sent as it is.
 */
export class StatementFunctions {
  private readonly logger = new Logger(StatementFunctions.name);
  /** Each statement's call, once its function is made; null for one sent as it is. */
  private readonly calls = new Map<string, string | null>();
  /** Statements whose function is being made, or waits its turn. */
  private readonly making = new Set<string>();
  /** Statements whose function could not be made: how many times, and when the next try may be. */
  private readonly failed = new Map<string, { failures: number; retryAt: number }>();
  /** Functions are made one at a time: a process holds at most one connection for it. */
  private queue: Promise<void> = Promise.resolve();

  /** `limit`: more statement texts than this are sent as they are. */
  constructor(
    private readonly pool: Pool,
    private readonly limit: number,
    private readonly makeTimeoutMs = MAKE_TIMEOUT_MS,
  ) {}

  /**
   * The text that runs `text` through its function, once the function is
   * made; until then, undefined, and the statement is sent as it is while
   * the function is made in the background. Never waiting for it keeps a
   * transaction from holding its connection while it waits for another one
   * to make a function: behind a bouncer with every server connection held
   * by such transactions, neither would ever come.
   */
  callFor(text: string): string | undefined {
    const call = this.calls.get(text);
    if (call !== undefined) return call ?? undefined;
    if (this.making.has(text)) return undefined;
    const failed = this.failed.get(text);
    const mayTry = failed === undefined ? this.calls.size + this.making.size + this.failed.size < this.limit : failed.retryAt <= Date.now();
    if (mayTry) {
      this.making.add(text);
      this.queue = this.queue.then(() => this.make(text));
    }
    return undefined;
  }

  /** Makes `text`'s function; after a failure, logged, a later run of the statement tries again (see RETRY_AFTER_MS). */
  private async make(text: string): Promise<void> {
    try {
      this.calls.set(text, (await this.callMade(text)) ?? null);
      this.failed.delete(text);
    } catch (error) {
      const failures = (this.failed.get(text)?.failures ?? 0) + 1;
      const waitMs = Math.min(RETRY_AFTER_MS * 2 ** (failures - 1), RETRY_AFTER_MAX_MS);
      this.failed.set(text, { failures, retryAt: Date.now() + waitMs });
      this.logger.warn({ msg: 'statement function not made: the statement is sent as it is', err: error, statement: text, retryInMs: waitMs });
    } finally {
      this.making.delete(text);
    }
  }

  private async callMade(text: string): Promise<string | undefined> {
    const held = await holdConnection(this.pool);
    const client = held.connection;
    // Closing the connection fails whatever it was waiting for; the failure is then told as this.
    let timedOut: Error | undefined;
    let broken: Error | undefined;
    const timeout = setTimeout(() => {
      timedOut = new Error(`statement function not made within ${this.makeTimeoutMs} ms`);
      held.release(timedOut);
    }, this.makeTimeoutMs);
    try {
      const describe = new Describe(text);
      void client.query(describe);
      const shape = await describe.shape;
      if (shape.columns === undefined || shape.columns.length === 0) return undefined;
      for (;;) {
        const source = await functionSource(client, text, shape);
        if (source === undefined) return undefined;
        try {
          if (source.create !== undefined) await client.query(source.create);
          return source.call;
        } catch (error) {
          // Made meanwhile by another process: the same function, since its
          // name is its definition's hash.
          if (!isDuplicateFunction(error)) throw error;
        }
      }
    } catch (error) {
      if (endsSession(error)) broken = error as Error;
      throw timedOut ?? error;
    } finally {
      clearTimeout(timeout);
      held.release(broken);
    }
  }

  /** Forgets `text`'s call (its function is gone): the next run sends it as it is, and makes the function again. */
  forget(text: string): void {
    this.calls.delete(text);
  }

  /** Settles once every function asked for so far is made or has failed (for tests). */
  async settled(): Promise<void> {
    await this.queue;
  }
}

/** A statement's parameter types, and its columns (undefined: it returns no rows), as Postgres describes them. */
export interface StatementShape {
  parameterTypes: number[];
  columns?: { name: string; typeId: number; typeModifier: number }[];
}

/**
 * The function's DDL and its call, or only the call when the function
 * exists already (made by another process, or before a restart); undefined
 * for a statement a function cannot return the columns of as they are: a
 * composite column (one output of a row type returns that row's columns)
 * or a pseudo-type (`record`).
 */
async function functionSource(
  client: PoolClient,
  text: string,
  shape: StatementShape,
): Promise<{ create?: string; call: string } | undefined> {
  const columns = shape.columns ?? [];
  const { rows } = await client.query<{ parameters: string[]; columns: string[]; kinds: string[]; schema: string }>(
    `SELECT ARRAY(SELECT format_type(t, NULL) FROM unnest($1::oid[]) WITH ORDINALITY AS p(t, i) ORDER BY i) AS parameters,
            ARRAY(SELECT format_type(t, NULLIF(m, -1)) FROM unnest($2::oid[], $3::int[]) WITH ORDINALITY AS c(t, m, i) ORDER BY i) AS columns,
            ARRAY(SELECT typtype::text FROM unnest($2::oid[]) WITH ORDINALITY AS c(t, i) JOIN pg_type ON pg_type.oid = t ORDER BY i) AS kinds,
            current_schema() AS schema`,
    [shape.parameterTypes, columns.map((column) => column.typeId), columns.map((column) => column.typeModifier)],
  );
  const [types] = rows;
  if (types.kinds.some((kind) => kind === 'c' || kind === 'p')) return undefined;
  const outputs = columns.map((column, i) => ({ variable: `r${i + 1}`, column: column.name, type: types.columns[i] }));
  const variables = outputs.map((output) => output.variable).join(', ');
  const signature = `(${types.parameters.join(', ')})
  RETURNS TABLE (${outputs.map((output) => `${output.variable} ${output.type}`).join(', ')})`;
  const body = `
#variable_conflict use_column
BEGIN
  FOR ${variables} IN
${text}
  LOOP
    RETURN NEXT;
  END LOOP;
END
`;
  const name = `stmt_${createHash('sha256')
    .update(JSON.stringify([TEMPLATE_VERSION, signature, body]))
    .digest('hex')
    .slice(0, 32)}`;
  const qualified = `${quoteIdentifier(types.schema)}.${name}`;
  const arguments_ = types.parameters.map((_, i) => `$${i + 1}`).join(', ');
  const call = `SELECT ${outputs.map((output) => `${output.variable} AS ${quoteIdentifier(output.column)}`).join(', ')} FROM ${qualified}(${arguments_})`;
  const existing = await client.query<{ source: string; ours: boolean }>(
    `SELECT prosrc AS source, proowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS ours
       FROM pg_proc WHERE proname = $1 AND pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = $2)`,
    [name, types.schema],
  );
  if (existing.rows.length > 0) {
    // A function of that name is used only if it is this one, made by this role.
    const [found] = existing.rows;
    if (existing.rows.length > 1 || found.source !== body || !found.ours) throw new Error(`${qualified} exists and is not this statement's function`);
    return { call };
  }
  const quote = `$${name}$`;
  if (text.includes(quote)) throw new Error(`the statement contains its function's quote ${quote}`);
  return { create: `CREATE FUNCTION ${qualified}${signature}\n  LANGUAGE plpgsql AS ${quote}${body}${quote}`, call };
}

/** 42723 duplicate_function, or the catalog's unique index when two sessions create it at once. */
function isDuplicateFunction(error: unknown): boolean {
  const { code, constraint } = error as { code?: string; constraint?: string };
  return code === '42723' || (code === '23505' && constraint === 'pg_proc_proname_args_nsp_index');
}

function quoteIdentifier(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/**
 * A statement parsed and described, not run: pg's extension point for a
 * query of one's own (a "submittable", as pg-cursor's), sending Parse,
 * Describe and Sync for the unnamed statement. Outside a transaction, a
 * transaction-pooling PgBouncer keeps the three on one server connection.
 */
class Describe implements Submittable {
  private parameterTypes: number[] = [];
  private columns: StatementShape['columns'];
  private connection?: Connection;
  private resolve!: (shape: StatementShape) => void;
  private reject!: (error: Error) => void;
  /** Settled once the server has answered. */
  readonly shape = new Promise<StatementShape>((resolve, reject) => {
    this.resolve = resolve;
    this.reject = reject;
  });

  constructor(private readonly text: string) {}

  submit(connection: Connection): void {
    this.connection = connection;
    connection.on('parameterDescription', this.onParameters);
    connection.parse({ name: '', text: this.text, types: [] }, false);
    connection.describe({ type: 'S', name: '' }, false);
    connection.sync();
  }

  handleRowDescription(message: { fields: { name: string; dataTypeID: number; dataTypeModifier: number }[] }): void {
    this.columns = message.fields.map((field) => ({ name: field.name, typeId: field.dataTypeID, typeModifier: field.dataTypeModifier }));
  }

  handleReadyForQuery(): void {
    this.done();
    this.resolve({ parameterTypes: this.parameterTypes, columns: this.columns });
  }

  handleError(error: Error): void {
    this.done();
    this.reject(error);
  }

  private readonly onParameters = (message: { dataTypeIDs: number[] }): void => {
    this.parameterTypes = message.dataTypeIDs;
  };

  private done(): void {
    this.connection?.off('parameterDescription', this.onParameters);
  }
}
