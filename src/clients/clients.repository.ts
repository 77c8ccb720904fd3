import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import type { ApiClient } from './clients.table';

@Injectable()
export class ClientsRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** In `db`, the transaction of client:create, which adds the client's first webhook endpoint in the same commit. */
  async create(name: string, apiKeyHash: string, db: EntityManager = this.dataSource.manager): Promise<ApiClient> {
    const row = await queryRow<ApiClient>(
      db,
      `INSERT INTO api_clients (name, api_key_hash) VALUES ($1, $2) RETURNING id, name`,
      [name, apiKeyHash],
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
