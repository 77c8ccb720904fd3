import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { generateWebhookSecret } from '../clients/api-key';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { HttpReply } from '../common/http-reply';
import { SecretBox } from '../common/secret-box';
import { newUlid } from '../common/ulid';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { keyInUse, keyReused } from '../idempotency/idempotency.errors';
import { parseIdempotencyKey } from '../idempotency/idempotency-key';
import { keyVerdict } from '../idempotency/key-verdict';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import {
  type DeletedWebhookEndpoint,
  MAX_ENDPOINTS_PER_CLIENT,
  WEBHOOK_ENDPOINT_ID_PATTERN,
  type WebhookEndpointList,
  type WebhookEndpointResource,
  type WebhookEndpointWithSecret,
  toWebhookEndpointResource,
} from './webhook-endpoint';
import type { CreateWebhookEndpointDto, UpdateWebhookEndpointDto } from './webhook-endpoints.dto';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { type WebhookUrlPolicy, checkedWebhookUrl } from './webhook-url-policy';

/** What a POST brings for its optional Idempotency-Key. */
export interface EndpointWriteCommand {
  clientId: string;
  idempotencyKeyHeader: string | string[] | undefined;
  fingerprint: string;
}

/** An endpoint write's answer, as it is sent, and as its key stores it (the secret sealed). */
interface Answer {
  status: number;
  resource: object & { secret?: string };
}

/** The part of an endpoint write that runs in its transaction. */
type TransactionalWrite = (tx: EntityManager) => Promise<Answer>;

/** A concurrent request claimed the key during the write: rolled back, and the key read again. */
class KeyTaken extends Error {}

/** Claim conflicts resolve within a round or two, as for payments. */
const MAX_CLAIM_ROUNDS = 3;
const DEFAULT_PREVIOUS_SECRET_HOURS = 24;

/**
 * A client's webhook endpoints (/v1/webhook_endpoints). Each write is one
 * transaction. With an Idempotency-Key, that transaction also claims the key
 * with the answer (IdempotencyRepository.claimAnswered): a retry replays the
 * answer byte for byte, another request under the key is 422, as on every
 * POST, and nothing is written twice. An answer that shows a secret is stored
 * on its key with the secret sealed, as the endpoint keeps it.
 */
@Injectable()
export class WebhookEndpointsService {
  private readonly policy: WebhookUrlPolicy;

  constructor(
    private readonly dataSource: DataSource,
    private readonly endpoints: WebhookEndpointsRepository,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly keys: IdempotencyRepository,
    private readonly box: SecretBox,
    @InjectConfig() private readonly config: AppConfig,
  ) {
    this.policy = { allowPrivate: config.webhooks.allowPrivateUrls };
  }

  create(command: EndpointWriteCommand, body: CreateWebhookEndpointDto): Promise<HttpReply> {
    return this.write(command, async () => {
      const url = await checkedWebhookUrl(body.url, this.policy);
      return async (tx) => ({
        status: 201,
        resource: await createEndpoint(tx, { endpoints: this.endpoints, box: this.box }, command.clientId, { ...body, url }),
      });
    });
  }

  /** Disabling (or deleting) stops the endpoint's pending deliveries in the same commit, and no other endpoint's. */
  update(command: EndpointWriteCommand, id: string, body: UpdateWebhookEndpointDto): Promise<HttpReply> {
    return this.write(command, async () => {
      const url = body.url === undefined ? undefined : await checkedWebhookUrl(body.url, this.policy);
      const status = body.disabled === undefined ? undefined : body.disabled ? 'disabled' : 'enabled';
      return async (tx) => {
        const row = await this.endpoints.update(tx, command.clientId, checkedId(id), {
          url,
          enabledEvents: body.enabled_events,
          status,
          description: body.description,
        });
        if (!row) throw endpointNotFound(id);
        if (status === 'disabled') await this.deliveries.stopPending(tx, { clientId: command.clientId, endpointId: row.id }, 'endpoint disabled');
        return { status: 200, resource: toWebhookEndpointResource(row) };
      };
    });
  }

  rotateSecret(command: EndpointWriteCommand, id: string, expiresInHours = DEFAULT_PREVIOUS_SECRET_HOURS): Promise<HttpReply> {
    return this.write(command, async () => async (tx) => {
      const secret = generateWebhookSecret();
      const row = await this.endpoints.rotateSecret(tx, command.clientId, checkedId(id), this.box.seal(secret), expiresInHours);
      if (!row) throw endpointNotFound(id);
      return { status: 200, resource: { ...toWebhookEndpointResource(row), secret } };
    });
  }

  async delete(clientId: string, id: string): Promise<DeletedWebhookEndpoint> {
    await this.dataSource.transaction(async (tx) => {
      if (!(await this.endpoints.markDeleted(tx, clientId, checkedId(id)))) throw endpointNotFound(id);
      await this.deliveries.stopPending(tx, { clientId, endpointId: id }, 'endpoint deleted');
    });
    return { id, object: 'webhook_endpoint', deleted: true };
  }

  async get(clientId: string, id: string): Promise<WebhookEndpointResource> {
    const row = await this.endpoints.findLive(this.dataSource.manager, clientId, checkedId(id));
    if (!row) throw endpointNotFound(id);
    return toWebhookEndpointResource(row);
  }

  async list(clientId: string, page: { limit?: number; startingAfter?: string }): Promise<WebhookEndpointList> {
    const db = this.dataSource.manager;
    if (page.startingAfter !== undefined && !(await this.endpoints.findLive(db, clientId, page.startingAfter))) {
      throw new DomainError(ErrorCode.ParameterInvalid, `No webhook endpoint ${page.startingAfter}.`, { param: 'starting_after' });
    }
    const result = await this.endpoints.listLive(db, clientId, { limit: page.limit ?? 10, startingAfter: page.startingAfter });
    return { object: 'list', data: result.endpoints.map(toWebhookEndpointResource), has_more: result.hasMore };
  }

  /**
   * Prepares a write and runs it in one transaction, and answers it; with a
   * key, reads the key first (a replay, or a 422 for another request, writes
   * nothing) and claims it with the answer in the write's transaction. A
   * refusal (400, 404) rolls back and stores nothing on the key, as a
   * payment's refusals do. `prepare` runs before any transaction opens: a
   * URL's check resolves its host, and no transaction waits on DNS.
   */
  private async write(command: EndpointWriteCommand, prepare: () => Promise<TransactionalWrite>): Promise<HttpReply> {
    if (command.idempotencyKeyHeader === undefined) return replyOf(await this.dataSource.transaction(await prepare()));
    const key = parseIdempotencyKey(command.idempotencyKeyHeader);
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const verdict = keyVerdict(await this.keys.find(this.dataSource.manager, command.clientId, key), command.fingerprint);
      switch (verdict.kind) {
        case 'replay':
          return { ...verdict.response, body: this.unsealed(verdict.response.body), headers: { 'Idempotent-Replayed': 'true' } };
        case 'reused':
          throw keyReused();
        case 'in_progress':
        case 'resumable':
          // A key answered here never has either state; the same fingerprint on an unfinished key cannot be ours.
          throw keyInUse();
        case 'new': {
          const write = await prepare();
          try {
            return replyOf(
              await this.dataSource.transaction(async (tx) => {
                const answer = await write(tx);
                const claimed = await this.keys.claimAnswered(tx, {
                  clientId: command.clientId,
                  key,
                  fingerprint: command.fingerprint,
                  status: answer.status,
                  body: this.sealed(answer.resource),
                  ttlHours: this.config.idempotency.keyTtlHours,
                });
                if (!claimed) throw new KeyTaken();
                return answer;
              }),
            );
          } catch (error) {
            if (!(error instanceof KeyTaken)) throw error;
          }
        }
      }
    }
    throw keyInUse();
  }

  /** The answer's bytes as its key keeps them: any secret sealed, every other byte as sent. */
  private sealed(resource: Answer['resource']): string {
    return JSON.stringify(resource.secret === undefined ? resource : { ...resource, secret: this.box.seal(resource.secret) });
  }

  /** The bytes first sent, from what the key keeps: parsing and serialising again keeps their order. */
  private unsealed(stored: string): string {
    const resource = JSON.parse(stored) as Answer['resource'];
    return resource.secret === undefined ? stored : JSON.stringify({ ...resource, secret: this.box.open(resource.secret) });
  }
}

/**
 * Creates an endpoint in the transaction `tx` (the API's, or client:create's
 * with its client), at `body.url` as checkedWebhookUrl returned it (checked
 * before the transaction: the check resolves the host). At most
 * MAX_ENDPOINTS_PER_CLIENT live at once: the schema holds each in one of that
 * many slots, so concurrent creations cannot pass the limit; one that lost
 * its slot to another tries the next.
 */
export async function createEndpoint(
  tx: EntityManager,
  { endpoints, box }: { endpoints: WebhookEndpointsRepository; box: SecretBox },
  clientId: string,
  body: CreateWebhookEndpointDto,
): Promise<WebhookEndpointWithSecret> {
  const { url } = body;
  const secret = generateWebhookSecret();
  const endpoint = {
    id: `we_${newUlid()}`,
    clientId,
    url,
    enabledEvents: body.enabled_events ?? ['*'],
    description: body.description ?? null,
    secretCiphertext: box.seal(secret),
  };
  for (let round = 0; round <= MAX_ENDPOINTS_PER_CLIENT; round++) {
    const row = await endpoints.insertInFreeSlot(tx, endpoint);
    if (row) return { ...toWebhookEndpointResource(row), secret };
    if ((await endpoints.countLive(tx, clientId)) >= MAX_ENDPOINTS_PER_CLIENT) throw tooManyEndpoints();
  }
  throw keyInUse();
}

function replyOf(answer: Answer): HttpReply {
  return { status: answer.status, body: JSON.stringify(answer.resource), headers: {} };
}

/** Anything but an endpoint id names none (and may hold what Postgres text refuses). */
function checkedId(id: string): string {
  if (!WEBHOOK_ENDPOINT_ID_PATTERN.test(id)) throw endpointNotFound(id);
  return id;
}

/** Names the id only when it is one: a client's arbitrary path is not echoed back. */
function endpointNotFound(id: string): DomainError {
  const message = WEBHOOK_ENDPOINT_ID_PATTERN.test(id) ? `No webhook endpoint ${id}.` : 'No such webhook endpoint.';
  return new DomainError(ErrorCode.NotFound, message, { param: 'id' });
}

function tooManyEndpoints(): DomainError {
  return new DomainError(
    ErrorCode.WebhookEndpointLimitReached,
    `A client has at most ${MAX_ENDPOINTS_PER_CLIENT} webhook endpoints; delete one to add another.`,
  );
}
