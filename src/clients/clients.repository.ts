import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import type { ApiClient } from './clients.table';

@Injectable()
export class ClientsRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** The client and, when given one, its webhook endpoint: one statement, so one commit. */
  async create(name: string, apiKeyHash: string, webhook?: { url: string; secret: string }): Promise<ApiClient> {
    const row = await queryRow<ApiClient>(
      this.dataSource.manager,
      `WITH client AS (
         INSERT INTO api_clients (name, api_key_hash) VALUES ($1, $2) RETURNING id, name
       ), endpoint AS (
         INSERT INTO webhook_endpoints (client_id, url, secret)
         SELECT id, $3, $4 FROM client WHERE $3::text IS NOT NULL
       )
       SELECT id, name FROM client`,
      [name, apiKeyHash, webhook?.url ?? null, webhook?.secret ?? null],
    );
    return row!;
  }

  async findByKeyHash(apiKeyHash: string): Promise<ApiClient | undefined> {
    return queryRow<ApiClient>(
      this.dataSource.manager,
      `SELECT id, name FROM api_clients WHERE api_key_hash = $1`,
      [apiKeyHash],
    );
  }

  /** Every client's id, in order: what work done client by client (the key prune) goes through. */
  async ids(): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(this.dataSource.manager, `SELECT id FROM api_clients ORDER BY id`);
    return rows.map((row) => row.id);
  }
}
