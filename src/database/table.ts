/**
 * One definition per table. Each table is declared once, as the domain's
 * property names mapped to typed columns; the record type and the SELECT list
 * derive from that declaration, and `schema.spec.ts` checks every declaration
 * against the migrated database, so a renamed, retyped or re-nulled column
 * fails a test instead of compiling.
 *
 * The statements stay hand-written SQL: the guarantees rest on their exact
 * shape (a conditional upsert, a lock only under the caller's lease, a
 * conditional transition), and on the hot path a statement is a string, not a
 * query builder run per request.
 */

/** The Postgres types the schema uses, by their `udt_name` in information_schema. */
type PgType = 'text' | '_text' | 'uuid' | 'bpchar' | 'varchar' | 'int2' | 'int4' | 'json' | 'jsonb' | 'timestamptz' | 'xid8';

/** A column and the TypeScript type node-postgres reads it as. */
export interface Column<T> {
  readonly name: string;
  readonly type: PgType;
  readonly nullable: boolean;
  /** Never set: carries T for the compiler. */
  readonly valueType?: T;
}

/** A column that also admits NULL. */
interface NotNullColumn<T> extends Column<T> {
  orNull(): Column<T | null>;
}

function column<T>(type: PgType) {
  return (name: string): NotNullColumn<T> => ({
    name,
    type,
    nullable: false,
    orNull: () => ({ name, type, nullable: true }),
  });
}

/** Column constructors, named for what node-postgres returns. */
export const col = {
  text: <T extends string = string>(name: string) => column<T>('text')(name),
  textArray: <T extends string = string>(name: string) => column<T[]>('_text')(name),
  uuid: (name: string) => column<string>('uuid')(name),
  char: (name: string) => column<string>('bpchar')(name),
  varchar: (name: string) => column<string>('varchar')(name),
  smallint: (name: string) => column<number>('int2')(name),
  integer: (name: string) => column<number>('int4')(name),
  /** json keeps the text as written, key order included; jsonb normalises it. */
  json: <T>(name: string) => column<T>('json')(name),
  jsonb: <T>(name: string) => column<T>('jsonb')(name),
  timestamptz: (name: string) => column<Date>('timestamptz')(name),
  /** A 64-bit transaction id; node-postgres reads it as its decimal text. */
  xid8: (name: string) => column<string>('xid8')(name),
};

export interface Table<C extends Record<string, Column<unknown>>> {
  readonly name: string;
  readonly columns: C;
  /**
   * Every column aliased to its property name (`client_id AS "clientId"`), for
   * SELECT and RETURNING: rows arrive already in the record's shape.
   */
  readonly selectList: string;
}

export function defineTable<C extends Record<string, Column<unknown>>>(name: string, columns: C): Table<C> {
  const selectList = Object.entries(columns)
    .map(([property, { name: column }]) => (column === property ? column : `${column} AS "${property}"`))
    .join(', ');
  return { name, columns, selectList };
}

/** The record a row of the table reads as. */
export type RecordOf<T extends Table<Record<string, Column<unknown>>>> = {
  -readonly [K in keyof T['columns']]: T['columns'][K] extends Column<infer V> ? V : never;
};
