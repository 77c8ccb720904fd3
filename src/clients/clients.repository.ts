import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { queryRow } from '../database/sql';
import type { ApiClient } from './clients.table';

@Injectable()
export class ClientsRepository {
  constructor(private readonly dataSource: DataSource) {}

  async create(name: string, apiKeyHash: string): Promise<ApiClient> {
    const row = await queryRow<ApiClient>(
      this.dataSource.manager,
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
}
