import { Injectable } from '@nestjs/common';
import { newUlid } from '../common/ulid';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { ChargeEventEmitter } from './mock-provider.emitter';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { chargeAt, versionAt } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type { Charge, ChargeParams, ChargeRecord, ChargeStatus } from './mock-provider.types';

/** How the reply to a charge request is sent; only the call that records a charge can misbehave. */
type ChargeOutcome =
  | { charge: Charge; reply: 'now' }
  | { charge: Charge; reply: 'after'; delayMs: number }
  | { charge: Charge; reply: 'never' };

interface TokenBehaviour {
  status: ChargeStatus;
  failureCode?: string;
  /** Given the 1-based number of this call for the key, an error to answer instead of recording. */
  refuse?: (call: number) => MockProviderError | undefined;
  firstReply?: 'slow' | 'lost';
}

const unavailable = () =>
  new MockProviderError(
    MockProviderErrorCode.ServiceUnavailable,
    'The processor is unavailable, try again',
  );

/** The test cards of docs/api.md ("The mock provider's test cards"). */
const TOKENS: Record<string, TokenBehaviour> = {
  pm_card_ok: { status: 'succeeded' },
  pm_card_declined: { status: 'failed', failureCode: 'card_declined' },
  pm_card_lost_response: { status: 'succeeded', firstReply: 'lost' },
  pm_card_timeout: { status: 'succeeded', firstReply: 'slow' },
  pm_card_flaky: { status: 'succeeded', refuse: (call) => (call <= 2 ? unavailable() : undefined) },
  pm_card_rate_limited: {
    status: 'succeeded',
    refuse: (call) =>
      call === 1
        ? new MockProviderError(MockProviderErrorCode.RateLimited, 'Too many requests', 1)
        : undefined,
  },
  pm_card_unavailable: { status: 'succeeded', refuse: unavailable },
  pm_card_pending: { status: 'pending' },
};

/**
 * Any other payment method is recorded as a definitive failure, as a real
 * processor rejects a payment method it does not know: retrying cannot change
 * that answer, so it must not look like a fault the caller should retry.
 */
const UNKNOWN_TOKEN: TokenBehaviour = { status: 'failed', failureCode: 'payment_method_unknown' };

@Injectable()
export class MockProviderService {
  /** Calls per key for the tokens that refuse their first calls; a restart starts them over. */
  private readonly calls = new Map<string, number>();

  constructor(
    private readonly store: MockProviderStore,
    @InjectConfig() private readonly config: AppConfig,
    private readonly events: ChargeEventEmitter,
  ) {}

  /**
   * Synchronous from the first look-up to the insert: concurrent requests with
   * one key are serialised by the event loop, so exactly one records a charge
   * and every call is counted once.
   */
  createCharge(idempotencyKey: string, params: ChargeParams): ChargeOutcome {
    const existing = this.store.find(idempotencyKey);
    if (existing) {
      if (!sameParams(existing, params)) {
        throw new MockProviderError(
          MockProviderErrorCode.IdempotencyKeyReused,
          `Key ${idempotencyKey} was already used with other parameters`,
        );
      }
      return { charge: this.present(existing), reply: 'now' };
    }

    const behaviour = TOKENS[params.payment_method] ?? UNKNOWN_TOKEN;
    const refusal = behaviour.refuse?.(this.countCall(idempotencyKey));
    if (refusal) throw refusal;

    const record: ChargeRecord = {
      id: `ch_${newUlid()}`,
      status: behaviour.status,
      amount: params.amount,
      currency: params.currency,
      failure_code: behaviour.failureCode ?? null,
      reference: params.reference,
      idempotency_key: idempotencyKey,
      created_at: new Date().toISOString(),
      payment_method: params.payment_method,
    };
    this.store.insert(record);
    this.events.chargeRecorded(record);

    const charge = this.present(record);
    switch (behaviour.firstReply) {
      case 'lost':
        return { charge, reply: 'never' };
      case 'slow':
        return { charge, reply: 'after', delayMs: this.config.mockProvider.slowReplyMs };
      default:
        return { charge, reply: 'now' };
    }
  }

  getCharge(idempotencyKey: string): Charge {
    const record = this.store.find(idempotencyKey);
    if (!record) {
      throw new MockProviderError(
        MockProviderErrorCode.ChargeNotFound,
        `No charge was received with key ${idempotencyKey}`,
      );
    }
    return this.present(record);
  }

  listCharges(): Charge[] {
    return this.store.all().map((record) => this.present(record));
  }

  private countCall(idempotencyKey: string): number {
    const call = (this.calls.get(idempotencyKey) ?? 0) + 1;
    this.calls.set(idempotencyKey, call);
    return call;
  }

  /** Settles a pending charge from its creation time, so the answer survives restarts. */
  private present(record: ChargeRecord): Charge {
    return chargeAt(record, versionAt(record, Date.now(), this.config.mockProvider.pendingSettleMs));
  }
}

function sameParams(record: ChargeRecord, params: ChargeParams): boolean {
  return (
    record.amount === params.amount &&
    record.currency === params.currency &&
    record.payment_method === params.payment_method &&
    record.reference === params.reference
  );
}
