import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { DataSource } from 'typeorm';
import { ApiKeysService, type ClientView } from '../src/clients/api-keys.service';
import { ClientsRepository } from '../src/clients/clients.repository';
import { SecretBox } from '../src/common/secret-box';
import { type OnboardedClient, onboardClient } from '../src/merchant-events/client-onboarding';
import { type AppConfig, loadConfigOrExit } from '../src/config/app-config';
import { createDataSource } from '../src/database/data-source';
import type { Charge, ListedChargeEvent } from '../src/mock-provider/mock-provider.types';
import { providerKeyFor } from '../src/ledger/payment-id';
import { runAudit } from './audit';
import type * as ClientLibrary from '../client/src/index.js';
import type { Event as MerchantEvent, EventType, Payment, PaymentCreateParams, PaymentsClient, RefundCreateParams } from '../client/src/index.js';
import type { components } from '../client/src/generated/api-types.js';
import { loadClientLibrary } from './lib/client-library';
import { type ManagedProcess, type ProcessExit, startApiProcess } from '../test/support/processes';
import { type BodyFacts, describeBody } from '../test/support/reply-recorder';
import { type Receipt, WebhookReceiver } from '../test/support/webhook-receiver';

/**
 * `npm run demo`: a narrated walk through what the service exists for, against
 * a stack that is already running (compose, or `npm run start:all`), with the
 * client library (client/, the built package) as a team uses it: one
 * instance, its retry rules, every give-up reported. Each step says what the
 * client sent, request by request, what came back and why, and checks it;
 * exit 0 when every step behaved as narrated, 1 when one did not, 2 when the
 * demo could not run.
 */

const USAGE = `Usage: npm run demo -- [--api URL] [--provider URL] [--api-key sk_…] [--webhooks] [--wait S]

A narrated walk through the service's scenarios against a RUNNING stack: a
first payment, a lost provider reply, a reused key, 20 concurrent retries, a
decline, a refund (and one too many), a pending charge settled by the
provider's event, a crash mid-payment finished by the worker, the merchant's
events, the API key rolled and the old one revoked (not with --api-key), the
merchant's webhook endpoints (with --webhooks), then the ledger audit. Exit 0
when every step behaved as narrated, 1 when one did not, 2 when it could not run.
  --api URL       the API (default http://localhost:3000)
  --provider URL  the mock provider (default http://localhost:4010)
  --api-key KEY   pay as this existing client; without it the demo creates a
                  client of its own in DATABASE_URL, as client:create does
  --webhooks      also receive the events as webhooks, on an endpoint the demo
                  serves on 127.0.0.1: only when the worker runs on this machine
                  (not under compose, whose containers cannot reach its loopback)
                  with WEBHOOK_ALLOW_PRIVATE_URLS=true, set for the demo too
  --wait S        how long to wait for the API and the provider to answer
                  before the first step (default 30)
DATABASE_URL, REDIS_URL and QUEUE_PREFIX must be those of the stack: the crash
step runs an API process of its own on them, and the audit reads them.
`;

/** How long the provider's pending charge and its event may take (PROVIDER_PENDING_SETTLE_MS is 3 s by default). */
const SETTLE_DEADLINE_MS = 30_000;
/** Slack on top of the worker's own schedule, for a busy machine. */
const WORKER_SLACK_MS = 30_000;
const WEBHOOK_DEADLINE_MS = 30_000;
/** The API answers the provider's event once its effect is committed, so the payment can read succeeded a moment before. */
const EVENT_ACK_DEADLINE_MS = 10_000;
const POLL_MS = 200;
/** A revoked key is refused by every API process within 2 s (AUTH_CACHE_TTL_MS is at most 1 s); slack for a busy machine. */
const REVOKE_DEADLINE_MS = 10_000;
/** How long the old key keeps working after the roll, and the old webhook secret after its rotation. */
const OVERLAP_HOURS = 1;
/** The receiver's path for the endpoint the merchant adds over the API (the first one, client:create's, is 'demo'). */
const DECLINES_ENDPOINT = 'declines';
const CONCURRENT_RETRIES = 20;
/**
 * The crash step's own API: its lease is what the worker waits out before it
 * takes the payment over, so a short one (above its provider deadline, as
 * the configuration demands) keeps the step short.
 */
const CRASHING_API_ENV = {
  NODE_ENV: 'development',
  LOG_LEVEL: 'info',
  CRASH_POINT: 'after_claim',
  CRASH_POINT_SIGNAL: 'SIGKILL',
  IDEMPOTENCY_LEASE_MS: '3000',
  PROVIDER_DEADLINE_MS: '2500',
};
const CRASH_LEASE_MS = Number(CRASHING_API_ENV.IDEMPOTENCY_LEASE_MS);
const CRASH_EXIT_DEADLINE_MS = 10_000;

interface Options {
  /** How long to wait for the stack to answer before the first step. */
  waitMs: number;
  apiUrl: string;
  providerUrl: string;
  apiKey?: string;
  webhooks: boolean;
}

/** One request the client library sent, and its answer (or the lack of one), as the wire carried them. */
interface Answer {
  key?: string;
  /** The HTTP status; undefined when no answer came. */
  status?: number;
  /** The body byte for byte. */
  text: string;
  replayed: boolean;
  retryAfter: string | null;
  /** The error code, and the payment or refund the body names: the object, or the one a decline or a failed refund embeds. */
  facts: BodyFacts;
  /** Why no answer came (ECONNREFUSED, a timeout…). */
  error?: string;
}

class Narrator {
  failures = 0;
  private steps = 0;

  step(title: string, why: string): void {
    this.steps++;
    this.line(`\n== ${this.steps}. ${title} ==`);
    this.line(why);
  }

  sent(what: string): void {
    this.line(`  -> ${what}`);
  }

  got(what: string): void {
    this.line(`  <- ${what}`);
  }

  note(what: string): void {
    this.line(`     ${what}`);
  }

  check(passed: boolean, what: string, detail?: string): boolean {
    if (!passed) this.failures++;
    this.line(`  ${passed ? 'ok  ' : 'FAIL'} ${what}${!passed && detail ? ` (${detail})` : ''}`);
    return passed;
  }

  line(text: string): void {
    process.stdout.write(`${text}\n`);
  }
}

/**
 * The fetch the demo gives the client library: it narrates each request the
 * library sends and each answer, and keeps the answers' bytes for the
 * byte-for-byte checks. The library does the retrying; this only watches.
 */
class Wire {
  readonly answers: Answer[] = [];
  private quiet = 0;

  constructor(private readonly say: Narrator) {}

  readonly fetch: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const key = new Headers(init?.headers).get('idempotency-key') ?? undefined;
    if (!this.quiet) {
      const body = typeof init?.body === 'string' ? `  ${init.body}` : '';
      this.say.sent(`${init?.method ?? 'GET'} ${url.pathname}${url.search}${key ? `  Idempotency-Key: ${key}` : ''}${body}`);
    }
    let answer: Answer;
    try {
      const response = await fetch(url, init);
      const text = await response.clone().text();
      answer = {
        key,
        status: response.status,
        text,
        replayed: response.headers.get('Idempotent-Replayed') === 'true',
        retryAfter: response.headers.get('Retry-After'),
        facts: describeBody(text),
      };
      return response;
    } catch (error) {
      answer = { key, text: '', replayed: false, retryAfter: null, facts: {}, error: errorName(error) };
      throw error;
    } finally {
      this.answers.push(answer!);
      if (!this.quiet) this.say.got(describe(answer!));
    }
  };

  /** Runs `fn` without narrating each request (a poll, a crowd); the answers are still kept. */
  async muted<T>(fn: () => Promise<T>): Promise<T> {
    this.quiet++;
    try {
      return await fn();
    } finally {
      this.quiet--;
    }
  }

  /** The answers to requests under `key`, in order. */
  to(key: string): Answer[] {
    return this.answers.filter((answer) => answer.key === key);
  }
}

/** What the client library a team installs gives the demo: its client class and its errors. */
type Library = typeof ClientLibrary;

type WebhookEndpoint = components['schemas']['WebhookEndpointResource'];
type WebhookEndpointWithSecret = components['schemas']['WebhookEndpointWithSecret'];
type WebhookEndpointList = components['schemas']['WebhookEndpointList'];
type DeletedWebhookEndpoint = components['schemas']['DeletedWebhookEndpoint'];

class Demo {
  private readonly finals = new Map<string, EventType>();
  /** The first step's key, which the third reuses with another body. */
  private readonly firstKey = newKey();
  /** The first step's payment, which the refund step refunds. */
  private firstPayment?: Payment;
  private readonly wire: Wire;
  private api!: PaymentsClient;
  /** The key `api` pays with: the key step rolls it. */
  private apiKey!: string;

  constructor(
    private readonly library: Library,
    private readonly options: Options,
    private readonly config: AppConfig,
    private readonly say: Narrator,
  ) {
    this.wire = new Wire(say);
  }

  /**
   * The client as a team sets it up: one instance, its default retry rules,
   * and every give-up reported, never silent.
   */
  private client(baseUrl: string, apiKey: string): PaymentsClient {
    return new this.library.PaymentsClient({
      baseUrl,
      apiKey,
      fetch: this.wire.fetch,
      onGiveUp: ({ operation, reason, attempts, idempotencyKey, lastError }) =>
        this.say.note(
          `the client gave up: ${operation} ${reason} after ${attempts} attempt(s)` +
            `${idempotencyKey ? `, key ${idempotencyKey}` : ''}: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
        ),
    });
  }

  /** `own`: the client the demo made for this run (none with --api-key), whose key it may roll. */
  async run(apiKey: string, own: OnboardedClient | undefined, receiver: WebhookReceiver | undefined): Promise<void> {
    this.apiKey = apiKey;
    this.api = this.client(this.options.apiUrl, apiKey);
    await this.firstAttempt();
    await this.lostReply();
    await this.keyReused();
    await this.concurrentRetries(apiKey);
    await this.decline();
    await this.refund();
    await this.pendingSettledByEvent();
    await this.crashFinishedByWorker(apiKey);
    await this.merchantEvents(receiver);
    await this.apiKeyRolled(own);
    await this.webhookEndpoints(own, receiver);
    await this.audit();
  }

  private async firstAttempt(): Promise<void> {
    this.say.step(
      'First attempt',
      'api.payments.create with a new Idempotency-Key: the API claims the key, charges once under the provider key ' +
        'pk_<payment id>, stores the answer.',
    );
    const key = this.firstKey;
    const body = card('pm_card_ok', 1_000);
    const payment = await this.pay(key, body);
    const [first] = this.wire.to(key);
    this.say.check(first?.status === 201 && payment?.status === 'succeeded', '201 with a succeeded payment', describe(first));
    if (!payment) return;
    this.firstPayment = payment;
    this.finals.set(payment.id, 'payment.succeeded');
    await this.oneChargeFor(payment.id);

    this.say.line('The same call again with the same key, as a client that never saw the answer (a restart, a lost reply) makes it:');
    const again = await this.pay(key, body);
    const replay = this.wire.to(key).at(-1);
    this.say.check(
      again?.id === payment.id && replay?.status === 201 && replay.replayed && replay.text === first.text,
      'the stored answer, byte for byte, with Idempotent-Replayed: true; the same payment; no second charge',
      describe(replay),
    );
    await this.oneChargeFor(payment.id);
  }

  private async keyReused(): Promise<void> {
    this.say.step(
      'The same key with a different body',
      'The first step\'s key, now with amount 1001: not a retry but a client bug. Answering with the stored payment would ' +
        'hide it, charging again would break the key\'s promise: the API refuses it, and the client does not retry a refusal.',
    );
    const error = await this.api.payments
      .create(card('pm_card_ok', 1_001), { idempotencyKey: this.firstKey })
      .then(() => undefined, (caught: unknown) => caught);
    this.say.check(
      error instanceof this.library.ApiError && error.status === 422 && error.code === 'idempotency_key_reused' && error.attempts === 1,
      'the call rejects with ApiError 422 idempotency_key_reused, after one request',
      String(error),
    );
  }

  private async lostReply(): Promise<void> {
    this.say.step(
      'A lost provider reply, and the retry',
      'pm_card_lost_response: the provider records the charge, then drops the connection without answering. ' +
        'The API cannot know whether it charged, so it retries under the same provider key, and the provider answers with the charge it already has.',
    );
    const key = newKey();
    const payment = await this.pay(key, card('pm_card_lost_response', 2_000));
    this.say.check(payment?.status === 'succeeded', '201 succeeded although the first reply was lost', describe(this.wire.to(key).at(-1)));
    if (!payment) return;
    this.finals.set(payment.id, 'payment.succeeded');
    const providerKey = providerKeyFor(payment.id);
    this.say.sent(`provider GET /charges/${providerKey}`);
    const { status, charge } = await this.providerCharge(providerKey);
    this.say.got(`${status} ${charge ? `${charge.id} ${charge.status}` : ''}`);
    this.say.check(status === 200 && charge?.id === payment.provider_charge_id, 'the provider holds the charge the payment names');
    await this.oneChargeFor(payment.id);
  }

  private async concurrentRetries(apiKey: string): Promise<void> {
    this.say.step(
      `${CONCURRENT_RETRIES} concurrent retries on one key`,
      `${CONCURRENT_RETRIES} processes of the merchant, each with its own client, pay one order at once with the key it ` +
        'stored: the requests meet at the key\'s primary key; one claims it and charges, the others get 409 ' +
        'idempotency_key_in_use with Retry-After, and their clients retry after it until the stored answer comes.',
    );
    const key = newKey();
    const body = card('pm_card_ok', 3_000);
    this.say.sent(`${CONCURRENT_RETRIES} x api.payments.create at once, Idempotency-Key: ${key}, ${JSON.stringify(body)}`);
    const clients = Array.from({ length: CONCURRENT_RETRIES }, () => this.client(this.options.apiUrl, apiKey));
    const payments = await this.wire.muted(() =>
      Promise.all(clients.map((client) => client.payments.create(body, { idempotencyKey: key }).catch(() => undefined))),
    );
    const answers = this.wire.to(key);
    const created = answers.filter((answer) => answer.status === 201);
    const inUse = answers.filter((answer) => answer.status === 409 && answer.facts.code === 'idempotency_key_in_use');
    this.say.got(
      `${answers.length} requests: ${created.length} x 201 (${created.filter((answer) => answer.replayed).length} of them replays), ` +
        `${inUse.length} x 409 idempotency_key_in_use, ${answers.length - created.length - inUse.length} other`,
    );
    this.say.check(created.length + inUse.length === answers.length, 'every answer is the 201 or a 409 idempotency_key_in_use');
    this.say.check(
      created.filter((answer) => !answer.replayed).length === 1,
      'exactly one request did the work (the one 201 without Idempotent-Replayed)',
    );
    this.say.check(new Set(created.map((answer) => answer.text)).size === 1, 'every 201 is the same payment, byte for byte');
    const ids = new Set(payments.map((payment) => payment?.id));
    const [paymentId] = ids;
    this.say.check(
      ids.size === 1 && paymentId !== undefined,
      `every call resolved with that payment, ${paymentId}: the 409s were retried by the clients, not by the caller`,
      [...ids].join(', '),
    );
    if (ids.size !== 1 || !paymentId) return;
    this.finals.set(paymentId, 'payment.succeeded');
    await this.oneChargeFor(paymentId);
  }

  private async decline(): Promise<void> {
    this.say.step(
      'A decline, replayed byte for byte',
      'pm_card_declined: the provider declines. A decline is a final answer: stored and replayed like a success, never ' +
        'charged on a retry. The client does not retry it: the call rejects with DeclineError and the failed payment.',
    );
    const key = newKey();
    const body = card('pm_card_declined', 4_000);
    const declined = () => this.api.payments.create(body, { idempotencyKey: key }).then(() => undefined, (caught: unknown) => caught);
    const error = await declined();
    const first = this.wire.to(key)[0];
    const payment = error instanceof this.library.DeclineError ? error.payment : undefined;
    this.say.check(
      first?.status === 402 && payment?.status === 'failed' && payment.failure_code === 'card_declined',
      '402 card_declined: DeclineError, with the failed payment',
      String(error),
    );
    if (payment) this.finals.set(payment.id, 'payment.failed');
    const again = await declined();
    const replay = this.wire.to(key).at(-1);
    this.say.check(
      again instanceof this.library.DeclineError && replay?.status === 402 && replay.replayed && replay.text === first?.text,
      'the same 402, byte for byte, replayed',
      describe(replay),
    );
  }

  private async refund(): Promise<void> {
    this.say.step(
      'A refund, and one too many',
      'api.refunds.create runs on the same machinery as a payment: its own key, one provider refund under rk_<refund id>, ' +
        'the answer stored and replayed. Its amount is reserved under the payment\'s lock, so refunds never add up to more than the payment.',
    );
    const payment = this.firstPayment;
    if (!payment) return;
    const key = newKey();
    const params: RefundCreateParams = { payment: payment.id, amount: 400, reason: 'requested_by_customer' };
    const refund = await this.api.refunds.create(params, { idempotencyKey: key }).catch(() => undefined);
    const first = this.wire.to(key)[0];
    this.say.check(refund?.status === 'succeeded' && refund.amount === 400, '201 with a succeeded refund of 400', describe(first));
    if (refund) this.finals.set(refund.id, 'refund.succeeded');
    const again = await this.api.refunds.create(params, { idempotencyKey: key }).catch(() => undefined);
    const replay = this.wire.to(key).at(-1);
    this.say.check(
      again?.id === refund?.id && replay?.status === 201 && replay.replayed && replay.text === first?.text,
      'the stored answer, byte for byte',
      describe(replay),
    );
    const read = await this.api.payments.retrieve(payment.id).catch(() => undefined);
    this.say.check(read?.amount_refunded === 400, 'the payment now shows amount_refunded 400', JSON.stringify(read));

    this.say.line(`Another key asks for ${payment.amount} more, past what is left (${payment.amount - 400}):`);
    const tooMuch = await this.api.refunds.create({ payment: payment.id, amount: payment.amount }).then(() => undefined, (caught: unknown) => caught);
    this.say.check(
      tooMuch instanceof this.library.ApiError && tooMuch.status === 400 && tooMuch.code === 'amount_too_large',
      'ApiError 400 amount_too_large; nothing written',
      String(tooMuch),
    );
  }

  private async pendingSettledByEvent(): Promise<void> {
    this.say.step(
      'A pending payment settled by the provider\'s event',
      'pm_card_pending: the provider accepts the charge as pending and settles it later. The API answers 202 with the payment ' +
        'pending and Retry-After; nothing is guessed. The provider then posts a signed charge.succeeded event, which moves the ' +
        'payment to succeeded. The client polls the 202 with the same key, after each Retry-After, until the answer is final.',
    );
    const key = newKey();
    const body = card('pm_card_pending', 5_000);
    const started = Date.now();
    const payment = await this.pay(key, body, { deadlineMs: SETTLE_DEADLINE_MS });
    const [first] = this.wire.to(key);
    this.say.check(
      first?.status === 202 && first.facts.paymentStatus === 'pending' && first.retryAfter !== null,
      'first 202 with the payment pending and Retry-After',
      describe(first),
    );
    this.say.got(`${payment?.status ?? 'no final answer'} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (!payment || !this.say.check(payment.status === 'succeeded', 'the call resolved with the payment succeeded')) return;
    this.finals.set(payment.id, 'payment.succeeded');
    // Only the worker's sweep could settle it otherwise, and the sweep takes no payment younger than this.
    const { staleAfterMs } = this.config.reconcile;
    const settledAfterMs = Date.parse(payment.updated_at) - Date.parse(payment.created_at);
    this.say.check(
      settledAfterMs < staleAfterMs,
      `settled ${settledAfterMs} ms after its creation, before the worker's sweep may take it (RECONCILE_STALE_AFTER_MS, ${staleAfterMs} ms): by the event`,
    );
    this.say.sent('provider GET /events, until its charge.succeeded event is acknowledged');
    const deadline = Date.now() + EVENT_ACK_DEADLINE_MS;
    let event = await this.settlingEvent(payment.id);
    while (!event?.delivered && Date.now() < deadline) {
      await delay(POLL_MS);
      event = await this.settlingEvent(payment.id);
    }
    this.say.got(event ? `${event.id} ${event.type} version ${event.data.version}, delivered: ${event.delivered}, attempts: ${event.attempts}` : 'no charge.succeeded event');
    this.say.check(event?.delivered === true, 'the API answered the signed event 2xx, after committing what it applied');
    await this.pay(key, body);
    const replay = this.wire.to(key).at(-1);
    this.say.check(replay?.status === 201 && replay.replayed, 'a call with the key now replays the final 201', describe(replay));
    await this.oneChargeFor(payment.id);
  }

  private async crashFinishedByWorker(apiKey: string): Promise<void> {
    const { staleAfterMs, intervalMs } = this.config.reconcile;
    const deadlineMs = CRASH_LEASE_MS + staleAfterMs + 2 * intervalMs + WORKER_SLACK_MS;
    this.say.step(
      'A crash mid-payment, finished by the worker',
      'The running stack is not the demo\'s to kill, so the crash happens in an API process the demo starts itself, on the ' +
        'same database, Redis and provider, with CRASH_POINT=after_claim: it commits the claim and the pending payment, then ' +
        'SIGKILLs itself before calling the provider. Its client retries, finds nobody, and gives up, loudly, with the key ' +
        'in its error. The stack\'s worker finds the payment once it is ' +
        `RECONCILE_STALE_AFTER_MS (${staleAfterMs} ms) old and its lease (${CRASH_LEASE_MS} ms) has run out, asks the ` +
        'provider, which never heard of it, and submits the charge under the same provider key.',
    );
    const crashing = await startApiProcess({ ...CRASHING_API_ENV, PROVIDER_URL: this.options.providerUrl });
    let paymentId: string | undefined;
    try {
      const body = card('pm_card_ok', 6_000);
      this.say.note(`the demo's own API: ${crashing.url}, pid ${crashing.pid}`);
      const error = await this.client(crashing.url, apiKey)
        .payments.create(body, { idempotencyKey: newKey() })
        .then(() => undefined, (caught: unknown) => caught);
      const crashed = await crashing.waitForLine(({ json }) => json?.msg === 'crash point reached');
      const exit = await exitWithin(crashing, CRASH_EXIT_DEADLINE_MS);
      paymentId = crashed.json?.paymentId as string | undefined;
      this.say.got(`the process wrote "crash point reached" for ${paymentId} and died (${exit ? (exit.signal ?? exit.code) : 'still running'})`);
      const lost = error instanceof this.library.NetworkError ? error : undefined;
      this.say.check(
        lost !== undefined && exit?.signal === 'SIGKILL',
        'the call rejected with NetworkError: the API died mid-payment, and nobody answered the retries',
        String(error),
      );
      if (!paymentId || !lost?.idempotencyKey) return;

      const before = await this.api.payments.retrieve(paymentId).catch(() => undefined);
      const { status } = await this.providerCharge(providerKeyFor(paymentId));
      this.say.note(`provider GET /charges/${providerKeyFor(paymentId)} -> ${status}`);
      this.say.check(before?.status === 'pending' && status === 404, 'left behind: a pending payment the provider never received');

      this.say.sent(`GET /v1/payments/${paymentId} every ${POLL_MS} ms, for up to ${Math.round(deadlineMs / 1000)} s`);
      const started = Date.now();
      const settled = await this.wire.muted(() => this.pollUntilFinal(paymentId!, deadlineMs));
      this.say.got(`${settled?.status ?? 'still pending'} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
      if (!this.say.check(settled?.status === 'succeeded', 'the worker finished it: succeeded')) return;
      this.finals.set(paymentId, 'payment.succeeded');
      await this.oneChargeFor(paymentId);
      this.say.line('The client comes back and resumes the payment with the key its error carries, at the stack\'s API:');
      const resumed = await this.pay(lost.idempotencyKey, body);
      const replay = this.wire.to(lost.idempotencyKey).at(-1);
      this.say.check(
        resumed?.id === paymentId && replay?.status === 201 && replay.replayed,
        'the 201 the worker stored, replayed: the same payment',
        describe(replay),
      );
    } finally {
      await crashing.kill();
    }
  }

  private async merchantEvents(receiver: WebhookReceiver | undefined): Promise<void> {
    this.say.step(
      'Merchant events',
      'Every final status is an event, written in the same transaction as the change, whoever made it (the request, the ' +
        'provider\'s event, the worker). The merchant pulls them with api.events.list' +
        (receiver ? ', and the worker pushes each to its webhook endpoint, signed.' : '; webhooks are off in this run (--webhooks).'),
    );
    this.say.sent('GET /v1/events?limit=100, page after page');
    const events = await this.wire.muted(() => this.listEventsOf(this.finals));
    const ours = events.filter((event) => this.finals.get(event.data.object.id) === event.type);
    this.say.got(`${events.length} events; ${ours.length} for the ${this.finals.size} final payments of this run: ${count(ours.map((e) => e.type))}`);
    this.say.check(
      [...this.finals].every(([id, type]) => ours.filter((event) => event.data.object.id === id && event.type === type).length === 1),
      'one event per final payment, of its status',
    );
    if (!receiver) return;

    const ids = new Set(ours.map((event) => event.id));
    this.say.sent(`wait up to ${WEBHOOK_DEADLINE_MS / 1000} s for a verified delivery of each of them at ${receiver.url('demo')}`);
    const delivered = () =>
      new Set(receiver.receipts('demo').filter((r) => r.verified && r.answer === 204 && ids.has(r.webhookId)).map((r) => r.webhookId));
    await poll(delivered, (found) => found.size >= ids.size, WEBHOOK_DEADLINE_MS);
    const receipts = receiver.receipts('demo');
    this.say.got(`${receipts.length} webhook requests, ${delivered().size} distinct events, signatures verified: ${receipts.every((r) => r.verified)}`);
    this.say.check(delivered().size === ids.size, 'every event was delivered to the merchant\'s endpoint, signed, under webhook-id = event id');
  }

  private async apiKeyRolled(own: OnboardedClient | undefined): Promise<void> {
    this.say.step(
      'The API key rolled, then the old one revoked',
      'What the operator runs when a merchant\'s key must change: npm run client:key -- --roll gives the client a new key ' +
        `and lets the old one work ${OVERLAP_HOURS} hour(s) more, so the merchant moves to the new one without a failed request; ` +
        '--revoke stops a key now: every API process refuses it within 2 s. The demo runs the code of these commands, and of ' +
        'npm run client:list, on DATABASE_URL.',
    );
    const payment = this.firstPayment;
    if (!own) {
      this.say.note('skipped: this run pays with --api-key, a key the demo does not own');
      return;
    }
    if (!payment) return;
    await withDatabase(this.config, async (dataSource) => {
      const keys = new ApiKeysService(new ClientsRepository(dataSource));
      const keysOf = async () => (await keys.list()).find((client) => client.id === own.id)?.keys ?? [];
      this.say.sent('npm run client:list');
      const before = await keysOf();
      this.say.got(`client ${own.id}: ${describeKeys(before)}`);
      const [old] = before;
      if (!this.say.check(before.length === 1 && old.status === 'active', 'the client has one key, active')) return;

      this.say.sent(`npm run client:key -- --roll ${old.id} --expires-in-hours ${OVERLAP_HOURS}`);
      const rolled = await keys.roll(old.id, String(OVERLAP_HOURS));
      this.say.got(JSON.stringify({ ...rolled, api_key: `${rolled.prefix}…` }));
      const overlapMs = Date.parse(rolled.rolled.expires_at) - Date.now();
      this.say.check(
        rolled.rolled.id === old.id && overlapMs > 0 && overlapMs <= OVERLAP_HOURS * 3_600_000,
        `a new key, ${rolled.id}, shown this once; the old one ends in ${OVERLAP_HOURS} hour(s)`,
      );
      const oldClient = this.api;
      const newClient = this.client(this.options.apiUrl, rolled.api_key);
      this.say.line('Until then both keys work: the merchant reads the first payment with the new key, then with the old one:');
      const byNew = await newClient.payments.retrieve(payment.id).catch(() => undefined);
      const byOld = await oldClient.payments.retrieve(payment.id).catch(() => undefined);
      this.say.check(byNew?.id === payment.id && byOld?.id === payment.id, 'both answered 200 with the payment');

      this.say.sent(`npm run client:key -- --revoke ${old.id}`);
      const revoked = await keys.revoke(old.id);
      this.say.got(JSON.stringify(revoked));
      this.say.check(revoked.status === 'revoked' && !revoked.already_revoked, 'the old key revoked, now');
      this.say.sent(`GET /v1/payments/${payment.id} with the old key, every ${POLL_MS} ms, until it is refused (at most ${REVOKE_DEADLINE_MS / 1000} s)`);
      const started = Date.now();
      const refusal = await this.wire.muted(() =>
        poll(
          () => oldClient.payments.retrieve(payment.id).then(() => undefined, (caught: unknown) => caught),
          (error) => error !== undefined,
          REVOKE_DEADLINE_MS,
        ),
      );
      const refused = refusal instanceof this.library.ApiError ? `${refusal.status} ${refusal.code}` : String(refusal ?? 'still 200');
      this.say.got(`${refused}, ${((Date.now() - started) / 1000).toFixed(1)} s after the revocation`);
      this.say.check(
        refusal instanceof this.library.ApiError && refusal.status === 401 && refusal.code === 'unauthenticated' && refusal.attempts === 1,
        'the revoked key gets 401 unauthenticated, which the client does not retry',
      );
      this.say.line('The new key goes on working:');
      const after = await newClient.payments.retrieve(payment.id).catch(() => undefined);
      this.say.check(after?.id === payment.id, '200 with the payment');
      this.say.sent('npm run client:list');
      const listed = await keysOf();
      this.say.got(`client ${own.id}: ${describeKeys(listed)}`);
      this.say.check(
        listed.find((key) => key.id === old.id)?.status === 'revoked' && listed.find((key) => key.id === rolled.id)?.status === 'active',
        `${old.id} revoked, ${rolled.id} active; the rest of the demo pays with the new key`,
      );
      this.api = newClient;
      this.apiKey = rolled.api_key;
    });
  }

  private async webhookEndpoints(own: OnboardedClient | undefined, receiver: WebhookReceiver | undefined): Promise<void> {
    this.say.step(
      'Webhook endpoints, managed by the merchant',
      'A client adds, lists, disables and deletes its own endpoints through /v1/webhook_endpoints, each with the event ' +
        'types it asks for and a secret of its own, shown once. rotate_secret makes a new secret; the old one keeps signing ' +
        'beside it for expires_in_hours, so a receiver holding either verifies while the merchant deploys the new one.',
    );
    if (!receiver || !own?.webhook_endpoint) {
      this.say.note('skipped: webhooks are off in this run (--webhooks)');
      return;
    }
    const created = await this.merchantCall<WebhookEndpointWithSecret>('POST', '/v1/webhook_endpoints', {
      url: receiver.url(DECLINES_ENDPOINT),
      enabled_events: ['payment.failed'],
      description: 'declines only',
    });
    const endpoint = created.body;
    if (
      !this.say.check(
        created.status === 201 && endpoint?.secret.startsWith('whsec_') === true && endpoint.enabled_events.join() === 'payment.failed',
        '201: the endpoint, for payment.failed only, with its secret (shown this once; the receiver verifies with it)',
      ) ||
      !endpoint
    ) {
      return;
    }
    receiver.trust(DECLINES_ENDPOINT, endpoint.secret);

    const listed = await this.merchantCall<WebhookEndpointList>('GET', '/v1/webhook_endpoints');
    for (const each of listed.body?.data ?? []) this.say.note(describeEndpoint(each));
    this.say.check(
      listed.body?.data.map((each) => each.id).join() === [endpoint.id, own.webhook_endpoint].join(),
      'the new endpoint, then the first one (client:create\'s, every event type): newest first, no secret',
    );

    this.say.line('A decline and a success; only the decline\'s event is for the new endpoint:');
    const declined = await this.pay(newKey(), card('pm_card_declined', 7_000));
    const paid = await this.pay(newKey(), card('pm_card_ok', 7_100));
    if (!declined || !paid) return;
    this.say.sent(`wait up to ${WEBHOOK_DEADLINE_MS / 1000} s for the decline's event at ${receiver.url(DECLINES_ENDPOINT)} and the success's at ${receiver.url('demo')}`);
    await poll(
      () => deliveredTo(receiver, DECLINES_ENDPOINT, declined.id) !== undefined && deliveredTo(receiver, 'demo', paid.id) !== undefined,
      (both) => both,
      WEBHOOK_DEADLINE_MS,
    );
    const got = receiver.receipts(DECLINES_ENDPOINT).map((receipt) => eventOf(receipt.body));
    this.say.got(`${DECLINES_ENDPOINT}: ${got.map((event) => `${event?.type} ${event?.data.object.id}`).join(', ') || 'nothing'}`);
    this.say.check(
      deliveredTo(receiver, DECLINES_ENDPOINT, declined.id)?.type === 'payment.failed' &&
        deliveredTo(receiver, 'demo', paid.id) !== undefined &&
        got.every((event) => event?.data.object.id === declined.id),
      'the new endpoint got payment.failed for the decline, signed with its secret, and nothing of the success, which the first endpoint got',
    );

    const rotated = await this.merchantCall<WebhookEndpointWithSecret>('POST', `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {
      expires_in_hours: OVERLAP_HOURS,
    });
    this.say.check(
      rotated.status === 200 && rotated.body?.secret.startsWith('whsec_') === true && rotated.body.secret !== endpoint.secret,
      `200: a new secret, shown this once; the old one signs beside it for ${OVERLAP_HOURS} hour(s)`,
    );
    if (!rotated.body) return;
    receiver.trust(DECLINES_ENDPOINT, rotated.body.secret);
    this.say.line('Another decline, delivered while both secrets sign:');
    const again = await this.pay(newKey(), card('pm_card_declined', 7_200));
    if (!again) return;
    this.say.sent(`wait up to ${WEBHOOK_DEADLINE_MS / 1000} s for its event at ${receiver.url(DECLINES_ENDPOINT)}`);
    const receipt = await poll(() => deliveredTo(receiver, DECLINES_ENDPOINT, again.id), (found) => found !== undefined, WEBHOOK_DEADLINE_MS);
    const signatures = receipt?.receipt.headers['webhook-signature'].split(' ') ?? [];
    this.say.got(`webhook-signature: ${signatures.map((signature) => `${signature.slice(0, 8)}…`).join(' ') || 'no delivery'}`);
    this.say.check(
      receipt !== undefined && signatures.length === 2 && verifiesWith(this.library, receipt.receipt, endpoint.secret),
      'two signatures: the delivery verifies with the new secret and with the old one',
    );

    const disabled = await this.merchantCall<WebhookEndpoint>('POST', `/v1/webhook_endpoints/${endpoint.id}`, { disabled: true });
    this.say.check(disabled.status === 200 && disabled.body?.status === 'disabled', '200: disabled, it gets no event until enabled again');
    const deleted = await this.merchantCall<DeletedWebhookEndpoint>('DELETE', `/v1/webhook_endpoints/${endpoint.id}`);
    this.say.check(deleted.status === 200 && deleted.body?.deleted === true, '200: deleted');
    const gone = await this.merchantCall('GET', `/v1/webhook_endpoints/${endpoint.id}`);
    this.say.check(gone.status === 404 && gone.code === 'resource_missing', 'a deleted endpoint is 404 resource_missing');
  }

  private async audit(): Promise<void> {
    this.say.step(
      'The ledger audit',
      'npm run audit\'s rules over the whole database and the provider\'s ledger (not just this run): no charge without its ' +
        'payment, no payment charged twice or succeeded without a charge, no decline charged, no pending payment forgotten.',
    );
    this.say.sent('provider GET /charges and GET /events, the reconciliation queue in Redis, the payments table');
    const report = await runAudit({ ...this.config, provider: { ...this.config.provider, url: this.options.providerUrl } });
    const broken = Object.entries(report.violations).filter(([, found]) => found.count > 0);
    this.say.got(
      `payments ${JSON.stringify(report.payments)}; charges ${JSON.stringify(report.charges)}; ` +
        `violations: ${broken.length === 0 ? 'none' : broken.map(([kind, found]) => `${kind} ${found.count}`).join(', ')}`,
    );
    this.say.check(report.ok, 'the ledgers agree', JSON.stringify(Object.fromEntries(broken)));
  }

  /**
   * One request to /v1/webhook_endpoints with the demo's key, through the
   * narrating fetch (the client library has no calls for these routes): the
   * status, and the body of a 2xx or the code of an error; none of them
   * when no answer came.
   */
  private async merchantCall<T>(method: string, path: string, body?: object): Promise<{ status?: number; body?: T; code?: string }> {
    try {
      const response = await this.wire.fetch(`${this.options.apiUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.apiKey}`, ...(body && { 'content-type': 'application/json' }) },
        body: body && JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, ...(response.ok ? { body: JSON.parse(text) as T } : { code: describeBody(text).code }) };
    } catch {
      return {};
    }
  }

  /** api.payments.create: the payment, succeeded or (from a DeclineError) failed; undefined when the call rejected otherwise. */
  private async pay(key: string, body: PaymentCreateParams, options: { deadlineMs?: number } = {}): Promise<Payment | undefined> {
    return this.api.payments.create(body, { idempotencyKey: key, ...options }).catch((error: unknown) => {
      if (error instanceof this.library.DeclineError) return error.payment;
      return undefined;
    });
  }

  private async settlingEvent(paymentId: string): Promise<ListedChargeEvent | undefined> {
    const events = await this.fromProvider<ListedChargeEvent[]>('/events');
    return events.find((event) => event.data.reference === paymentId && event.type === 'charge.succeeded');
  }

  private pollUntilFinal(id: string, timeoutMs: number): Promise<Payment | undefined> {
    return poll(() => this.api.payments.retrieve(id).catch(() => undefined), (payment) => payment?.status !== 'pending', timeoutMs);
  }

  /**
   * The whole list, read again until it shows an event for each of `finals`
   * or 10 s pass: an event is listed once the writes to the database that
   * started before its own have ended.
   */
  private async listEventsOf(finals: Map<string, string>): Promise<MerchantEvent[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const events: MerchantEvent[] = [];
      for await (const event of this.api.events.list({ limit: 100 })) events.push(event);
      const listed = new Set(events.map((event) => `${event.data.object.id} ${event.type}`));
      if ([...finals].every(([id, type]) => listed.has(`${id} ${type}`)) || Date.now() > deadline) return events;
      await delay(POLL_MS);
    }
  }

  /** The provider's whole ledger, filtered to one payment: the API sends the payment id as the charge's reference. */
  private async oneChargeFor(paymentId: string): Promise<void> {
    this.say.sent('provider GET /charges');
    const charges = (await this.fromProvider<Charge[]>('/charges')).filter((charge) => charge.reference === paymentId);
    this.say.got(charges.map((charge) => `${charge.id} ${charge.status} ${charge.amount} ${charge.currency} key ${charge.idempotency_key}`).join('; ') || 'no charge');
    this.say.check(charges.length === 1, `one charge at the provider for ${paymentId}`, `${charges.length}`);
  }

  private async providerCharge(providerKey: string): Promise<{ status: number; charge?: Charge }> {
    const response = await fetch(`${this.options.providerUrl}/charges/${encodeURIComponent(providerKey)}`);
    return { status: response.status, charge: response.status === 200 ? ((await response.json()) as Charge) : undefined };
  }

  private async fromProvider<T>(path: string): Promise<T> {
    const response = await fetch(`${this.options.providerUrl}${path}`);
    if (response.status !== 200) throw new Error(`provider GET ${path} answered ${response.status}`);
    return (await response.json()) as T;
  }
}

/**
 * The child's exit, or undefined after timeoutMs. The timer is what keeps
 * this process alive meanwhile: a child's `exited` alone does not (see
 * processes.ts), and with nothing else pending Node would end the demo there.
 */
async function exitWithin(child: ManagedProcess, timeoutMs: number): Promise<ProcessExit | undefined> {
  const timer = new AbortController();
  try {
    return await Promise.race([child.exited, delay(timeoutMs, undefined, { signal: timer.signal }).catch(() => undefined)]);
  } finally {
    timer.abort();
  }
}

/** `read` every POLL_MS until `done` says yes or timeoutMs pass: its last value. */
async function poll<T>(read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await delay(POLL_MS);
    value = await read();
  }
  return value;
}

async function withDatabase<T>(config: AppConfig, use: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const dataSource = await createDataSource(config).initialize();
  try {
    return await use(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/** A client's keys as client:list shows them, on one line. */
function describeKeys(keys: ClientView['keys']): string {
  return keys.map((key) => `${key.id} ${key.prefix}… ${key.status}${key.status === 'expiring' ? ` until ${key.expires_at}` : ''}`).join('; ');
}

function describeEndpoint(endpoint: WebhookEndpoint): string {
  return `${endpoint.id} ${endpoint.status} [${endpoint.enabled_events.join(', ')}] ${endpoint.url}${endpoint.description ? ` (${endpoint.description})` : ''}`;
}

function eventOf(body: string): MerchantEvent | undefined {
  try {
    return JSON.parse(body) as MerchantEvent;
  } catch {
    return undefined;
  }
}

/** The verified, acknowledged delivery to endpoint `name` of an event of `objectId`, if one came. */
function deliveredTo(receiver: WebhookReceiver, name: string, objectId: string): { receipt: Receipt; type: EventType } | undefined {
  for (const receipt of receiver.receipts(name)) {
    const event = eventOf(receipt.body);
    if (receipt.verified && receipt.answer === 204 && event?.data.object.id === objectId) return { receipt, type: event.type };
  }
  return undefined;
}

/** Whether a delivery verifies with `secret`, as the merchant's code checks it with the client library. */
function verifiesWith(library: Library, receipt: Receipt, secret: string): boolean {
  try {
    library.verifyWebhook(receipt.body, receipt.headers, secret);
    return true;
  } catch {
    return false;
  }
}

function card(paymentMethod: string, amount: number): PaymentCreateParams {
  return { amount, currency: 'EUR', payment_method: paymentMethod };
}

function newKey(): string {
  return `demo-${randomUUID()}`;
}

function describe(answer: Answer | undefined): string {
  if (!answer) return 'no request';
  if (answer.status === undefined) return `no answer (${answer.error})`;
  const parts: string[] = [String(answer.status)];
  const { code, paymentId, paymentStatus, refundId, refundStatus, chargeId } = answer.facts;
  if (code) parts.push(code);
  if (paymentId ?? refundId) parts.push([paymentId ?? refundId, paymentStatus ?? refundStatus].filter(Boolean).join(' '));
  if (chargeId) parts.push(`charge ${chargeId}`);
  if (answer.replayed) parts.push('Idempotent-Replayed: true');
  if (answer.retryAfter !== null) parts.push(`Retry-After: ${answer.retryAfter}`);
  return parts.join('  ');
}

function count(values: string[]): string {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts].map(([value, n]) => `${n} ${value}`).join(', ') || 'none';
}

function errorName(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return error instanceof Error ? error.message : String(error);
}

function parseOptions(argv: string[]): Options & { help: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      api: { type: 'string', default: 'http://localhost:3000' },
      provider: { type: 'string', default: 'http://localhost:4010' },
      'api-key': { type: 'string' },
      webhooks: { type: 'boolean', default: false },
      wait: { type: 'string', default: '30' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.webhooks && values['api-key']) {
    throw new Error('--webhooks needs a client the demo creates (with the endpoint); drop --api-key');
  }
  if (!/^\d+$/.test(values.wait)) throw new Error(`--wait must be a whole number of seconds (got ${JSON.stringify(values.wait)})`);
  return {
    waitMs: Number(values.wait) * 1_000,
    apiUrl: values.api.replace(/\/+$/, ''),
    providerUrl: values.provider.replace(/\/+$/, ''),
    apiKey: values['api-key'],
    webhooks: values.webhooks,
    help: values.help,
  };
}

/**
 * Whether the stack is up before any step (a demo against nothing is "could
 * not run", not a failed step), asking until the deadline: a stack just
 * started, or a container whose network is not set up yet, answers a moment later.
 */
async function reachable(url: string, waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      await response.body?.cancel();
      if (response.ok) return true;
    } catch {
      // Not up yet: asked again below until the deadline.
    }
    if (Date.now() >= deadline) return false;
    await delay(500);
  }
}

function createDemoClient(config: AppConfig, webhookUrl: string | undefined): Promise<OnboardedClient> {
  return withDatabase(config, (dataSource) =>
    onboardClient(dataSource, { box: new SecretBox(config.secrets), policy: { allowPrivate: config.webhooks.allowPrivateUrls } }, `demo ${new Date().toISOString()}`, { webhookUrl }),
  );
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const config = loadConfigOrExit();
  if (options.webhooks && !config.webhooks.allowPrivateUrls) {
    throw new Error('--webhooks serves its endpoint on 127.0.0.1: set WEBHOOK_ALLOW_PRIVATE_URLS=true, for the demo and the worker');
  }
  const library = await loadClientLibrary();
  for (const url of [`${options.apiUrl}/health/ready`, `${options.providerUrl}/health`]) {
    if (!(await reachable(url, options.waitMs))) throw new Error(`${url} does not answer 200: is the stack running?`);
  }
  const say = new Narrator();
  const receiver = options.webhooks ? await WebhookReceiver.start() : undefined;
  try {
    let apiKey = options.apiKey;
    let own: OnboardedClient | undefined;
    if (!apiKey) {
      own = await createDemoClient(config, receiver?.url('demo'));
      if (receiver && own.webhook_secret) receiver.trust('demo', own.webhook_secret);
      apiKey = own.api_key;
      say.line(`A client of the demo's own: ${own.id}${receiver ? `, webhook endpoint ${receiver.url('demo')}` : ''}.`);
    }
    say.line(`API ${options.apiUrl}, provider ${options.providerUrl}.`);
    await new Demo(library, options, config, say).run(apiKey, own, receiver);
  } finally {
    await receiver?.close();
  }
  say.line(say.failures === 0 ? '\nEvery step behaved as narrated.' : `\n${say.failures} check(s) did not behave as narrated.`);
  return say.failures === 0 ? 0 : 1;
}

if (require.main === module) {
  // Until the verdict: a demo whose event loop ran dry before it is one that did not run.
  process.exitCode = 2;
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`demo could not run: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(2);
    },
  );
}
