import { Injectable } from '@nestjs/common';
import { newUlid } from '../common/ulid';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { ProviderEventEmitter } from './mock-provider.emitter';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { chargeAt, refundAt, versionAt } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type {
  Charge,
  ChargeParams,
  ChargeRecord,
  ChargeStatus,
  Refund,
  RefundParams,
  RefundRecord,
  RefundStatus,
} from './mock-provider.types';

/** How the reply to a request is sent; only the call that records a charge or a refund can misbehave. */
export type Reply = { reply: 'now' } | { reply: 'after'; delayMs: number } | { reply: 'never' };
type ChargeOutcome = Reply & { charge: Charge };
type RefundOutcome = Reply & { refund: Refund };

type FirstReply = 'slow' | 'lost';

/** What the provider does with a refund of a charge made with this token. */
interface RefundBehaviour {
  status: RefundStatus;
  failureCode?: string;
  firstReply?: FirstReply;
}

interface TokenBehaviour {
  status: ChargeStatus;
  failureCode?: string;
  /** Given the 1-based number of this call for the key, an error to answer instead of recording. */
  refuse?: (call: number) => MockProviderError | undefined;
  firstReply?: FirstReply;
  /** Unless said otherwise, a refund succeeds at once. */
  refund?: RefundBehaviour;
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
  pm_card_refund_fails: { status: 'succeeded', refund: { status: 'failed', failureCode: 'refund_declined' } },
  pm_card_refund_lost_response: { status: 'succeeded', refund: { status: 'succeeded', firstReply: 'lost' } },
  pm_card_refund_timeout: { status: 'succeeded', refund: { status: 'succeeded', firstReply: 'slow' } },
  pm_card_refund_pending: { status: 'succeeded', refund: { status: 'pending' } },
};

const REFUND_SUCCEEDS: RefundBehaviour = { status: 'succeeded' };

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
    private readonly events: ProviderEventEmitter,
  ) {}

  /**
   * Synchronous from the first look-up to the insert: concurrent requests with
   * one key are serialised by the event loop, so exactly one records a charge
   * and every call is counted once.
   */
  createCharge(idempotencyKey: string, params: ChargeParams): ChargeOutcome {
    const existing = this.store.find(idempotencyKey);
    if (existing) {
      refuseReusedKey(idempotencyKey, sameParams(existing, params));
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

    return { charge: this.present(record), ...this.firstReply(behaviour.firstReply) };
  }

  getCharge(idempotencyKey: string): Charge {
    const record = this.store.find(idempotencyKey);
    return this.present(received(record, MockProviderErrorCode.ChargeNotFound, `charge with key ${idempotencyKey}`));
  }

  listCharges(): Charge[] {
    return this.store.all().map((record) => this.present(record));
  }

  /**
   * Like createCharge, synchronous from the first look-up to the insert, so
   * concurrent refunds of one charge can never together exceed it. The refund
   * behaves as the charge's payment method says; only a charge that has
   * succeeded (a pending one once settled) can be refunded, and the refunds of
   * a charge that have not failed never sum above it.
   */
  createRefund(idempotencyKey: string, params: RefundParams): RefundOutcome {
    const existing = this.store.findRefund(idempotencyKey);
    if (existing) {
      refuseReusedKey(idempotencyKey, sameRefundParams(existing, params));
      return { refund: this.presentRefund(existing), reply: 'now' };
    }

    const charge = this.refundableCharge(params.charge);
    const refunded = this.store
      .refundsOf(charge.id)
      .filter((refund) => refund.status !== 'failed')
      .reduce((sum, refund) => sum + refund.amount, 0);
    if (refunded + params.amount > charge.amount) {
      throw new MockProviderError(
        MockProviderErrorCode.AmountTooLarge,
        `Refunding ${params.amount} would exceed charge ${charge.id}: ${charge.amount - refunded} of ${charge.amount} is left`,
      );
    }

    const behaviour = (TOKENS[charge.payment_method] ?? UNKNOWN_TOKEN).refund ?? REFUND_SUCCEEDS;
    const record: RefundRecord = {
      id: `rf_${newUlid()}`,
      object: 'refund',
      charge: charge.id,
      amount: params.amount,
      currency: charge.currency,
      status: behaviour.status,
      failure_code: behaviour.failureCode ?? null,
      reference: params.reference,
      idempotency_key: idempotencyKey,
      created_at: new Date().toISOString(),
    };
    this.store.insertRefund(record);
    this.events.refundRecorded(record);

    return { refund: this.presentRefund(record), ...this.firstReply(behaviour.firstReply) };
  }

  getRefund(idempotencyKey: string): Refund {
    const record = this.store.findRefund(idempotencyKey);
    return this.presentRefund(received(record, MockProviderErrorCode.RefundNotFound, `refund with key ${idempotencyKey}`));
  }

  listRefunds(): Refund[] {
    return this.store.allRefunds().map((record) => this.presentRefund(record));
  }

  private refundableCharge(chargeId: string): ChargeRecord {
    const charge = received(this.store.findChargeById(chargeId), MockProviderErrorCode.ChargeNotFound, `charge ${chargeId}`);
    const { status } = this.present(charge);
    if (status !== 'succeeded') {
      throw new MockProviderError(
        MockProviderErrorCode.ChargeNotRefundable,
        `Charge ${chargeId} is ${status}: only a succeeded charge can be refunded`,
      );
    }
    return charge;
  }

  private firstReply(firstReply: FirstReply | undefined): Reply {
    switch (firstReply) {
      case 'lost':
        return { reply: 'never' };
      case 'slow':
        return { reply: 'after', delayMs: this.config.mockProvider.slowReplyMs };
      default:
        return { reply: 'now' };
    }
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

  private presentRefund(record: RefundRecord): Refund {
    return refundAt(record, versionAt(record, Date.now(), this.config.mockProvider.pendingSettleMs));
  }
}

/** A key already used must come with the same parameters: a real processor refuses it otherwise. */
function refuseReusedKey(idempotencyKey: string, sameParameters: boolean): void {
  if (!sameParameters) {
    throw new MockProviderError(
      MockProviderErrorCode.IdempotencyKeyReused,
      `Key ${idempotencyKey} was already used with other parameters`,
    );
  }
}

/** The record, or the not-found error `code` naming `what` was never received. */
function received<T>(record: T | undefined, code: MockProviderErrorCode, what: string): T {
  if (record === undefined) throw new MockProviderError(code, `No ${what} was received`);
  return record;
}

function sameParams(record: ChargeRecord, params: ChargeParams): boolean {
  return (
    record.amount === params.amount &&
    record.currency === params.currency &&
    record.payment_method === params.payment_method &&
    record.reference === params.reference
  );
}

function sameRefundParams(record: RefundRecord, params: RefundParams): boolean {
  return record.charge === params.charge && record.amount === params.amount && record.reference === params.reference;
}
