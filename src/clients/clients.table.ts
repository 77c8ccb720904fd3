import { type RecordOf, col, defineTable } from '../database/table';

export const apiClientsTable = defineTable('api_clients', {
  id: col.uuid('id'),
  name: col.text('name'),
  createdAt: col.timestamptz('created_at'),
});

/** A row of the api_clients table. */
type ApiClientRecord = RecordOf<typeof apiClientsTable>;

/** Who a request acts for: everything it can see is scoped to this client. */
export type ApiClient = Pick<ApiClientRecord, 'id' | 'name'>;
