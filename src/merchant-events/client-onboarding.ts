import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../clients/clients.repository';
import { ClientsService } from '../clients/clients.service';
import type { ApiClient } from '../clients/clients.table';
import type { SecretBox } from '../common/secret-box';
import { createEndpoint } from './webhook-endpoints.service';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { type WebhookUrlPolicy, checkedWebhookUrl } from './webhook-url-policy';

export type OnboardedClient = ApiClient & {
  api_key: string;
  webhook_endpoint?: string;
  webhook_url?: string;
  webhook_secret?: string;
};

/**
 * A new client, and with a URL its first webhook endpoint (every event type),
 * in one commit: what client:create does, and the tools and tests that make
 * merchants. The key and the secret returned are the only copies shown.
 */
export async function onboardClient(
  dataSource: DataSource,
  { box, policy }: { box: SecretBox; policy: WebhookUrlPolicy },
  name: string,
  options: { webhookUrl?: string } = {},
): Promise<OnboardedClient> {
  // Checked before the transaction: the check resolves the host.
  const url = options.webhookUrl === undefined ? undefined : await checkedWebhookUrl(options.webhookUrl, policy);
  return dataSource.transaction(async (tx) => {
    const client = await new ClientsService(new ClientsRepository(dataSource)).create(name, tx);
    if (url === undefined) return client;
    const endpoint = await createEndpoint(tx, { endpoints: new WebhookEndpointsRepository(), box }, client.id, { url });
    return { ...client, webhook_endpoint: endpoint.id, webhook_url: endpoint.url, webhook_secret: endpoint.secret };
  });
}
