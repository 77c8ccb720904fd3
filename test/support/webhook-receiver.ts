import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a merchant endpoint received, and what it answered. */
export interface Receipt {
  webhookId: string;
  body: string;
  /** The Standard Webhooks headers as received, to verify against any secret later. */
  headers: Record<string, string>;
  /** Whether the signature verified against the endpoint's secret (within the replay window). */
  verified: boolean;
  /** The status answered, or 'held' for a request left unanswered. */
  answer: number | 'held';
  /** Date.now() on arrival. */
  at: number;
}

/** How an endpoint answers its nth request (0-based) for one webhook-id: a status, or 'hold' (never answer). */
export type Behaviour = (attempt: number) => number | 'hold';

const ACCEPT: Behaviour = () => 204;

interface Endpoint {
  secret?: Webhook;
  behaviour: Behaviour;
  receipts: Receipt[];
  open: number;
  maxOpen: number;
}

/**
 * Merchant webhook endpoints on one loopback server, one per path, for the
 * tests and the chaos run: each verifies what it gets with its client's
 * secret, answers as told, and keeps every receipt, so a caller can count
 * deliveries per event id and find the missing or the duplicated.
 */
export class WebhookReceiver {
  private readonly endpoints = new Map<string, Endpoint>();

  private constructor(
    private readonly server: Server,
    readonly baseUrl: string,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    const server = createServer();
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const receiver = new WebhookReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on('request', (request, response) => receiver.handle(request, response));
    return receiver;
  }

  /** The URL of endpoint `name`, which accepts everything until told otherwise. */
  url(name: string): string {
    this.endpoint(name);
    return `${this.baseUrl}/${encodeURIComponent(name)}`;
  }

  /** The secret client:create gave the endpoint's client: signatures are checked against it. */
  trust(name: string, secret: string): void {
    this.endpoint(name).secret = new Webhook(secret);
  }

  behave(name: string, behaviour: Behaviour): void {
    this.endpoint(name).behaviour = behaviour;
  }

  receipts(name: string): Receipt[] {
    return [...this.endpoint(name).receipts];
  }

  /** The most requests the endpoint held open at once. */
  maxOpen(name: string): number {
    return this.endpoint(name).maxOpen;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((closed) => this.server.close(() => closed()));
  }

  private endpoint(name: string): Endpoint {
    let endpoint = this.endpoints.get(name);
    if (!endpoint) {
      endpoint = { behaviour: ACCEPT, receipts: [], open: 0, maxOpen: 0 };
      this.endpoints.set(name, endpoint);
    }
    return endpoint;
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const at = Date.now();
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const endpoint = this.endpoints.get(decodeURIComponent(request.url?.slice(1) ?? ''));
      if (!endpoint) {
        response.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      const webhookId = String(request.headers['webhook-id'] ?? '');
      const attempt = endpoint.receipts.filter((receipt) => receipt.webhookId === webhookId).length;
      const decided = endpoint.behaviour(attempt);
      const answer = decided === 'hold' ? 'held' : decided;
      const headers = {
        'webhook-id': webhookId,
        'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
      };
      endpoint.receipts.push({ webhookId, body, headers, verified: verifies(endpoint.secret, body, request), answer, at });
      if (answer === 'held') {
        endpoint.open++;
        endpoint.maxOpen = Math.max(endpoint.maxOpen, endpoint.open);
        response.once('close', () => endpoint.open--);
        return;
      }
      response.writeHead(answer).end();
    });
  }
}

function verifies(secret: Webhook | undefined, body: string, request: IncomingMessage): boolean {
  if (!secret) return false;
  try {
    secret.verify(body, request.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}
