import { useTestDatabase } from '../../test/support/test-database';
import { TABLES } from '../../test/support/tables';

interface SchemaColumn {
  name: string;
  type: string;
  nullable: boolean;
}

describe('the table definitions', () => {
  const db = useTestDatabase();

  async function schemaColumns(table: string): Promise<SchemaColumn[]> {
    const rows: { column_name: string; udt_name: string; is_nullable: 'YES' | 'NO' }[] = await db.dataSource.query(
      `SELECT column_name, udt_name, is_nullable FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = $1`,
      [table],
    );
    return rows
      .map((row) => ({ name: row.column_name, type: row.udt_name, nullable: row.is_nullable === 'YES' }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  it.each(TABLES.map((table) => [table.name, table] as const))(
    'declare every column of %s with the migrated name, type and nullability',
    async (name, table) => {
      const declared = Object.values(table.columns)
        .map(({ name: column, type, nullable }) => ({ name: column, type, nullable }))
        .sort((a, b) => a.name.localeCompare(b.name));

      expect(declared).toEqual(await schemaColumns(name));
    },
  );

  it('cover every table the migrations create', async () => {
    const rows: { table_name: string }[] = await db.dataSource.query(
      `SELECT table_name FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'typeorm_migrations'`,
    );

    expect(rows.map((row) => row.table_name).sort()).toEqual(TABLES.map((table) => table.name).sort());
  });
});
