import { ApiProperty } from '@nestjs/swagger';
import { ErrorBody } from '../common/openapi';
import { newUlid } from '../common/ulid';
import type { ChargeInput } from '../provider/provider.client';
import type { CreatePaymentDto } from './payments.dto';
import type { NewPayment } from './payments.repository';
import type { Payment } from './payments.table';

export type PaymentStatus = 'pending' | 'succeeded' | 'failed' | 'requires_review';

const PAYMENT_STATUSES: readonly PaymentStatus[] = ['pending', 'succeeded', 'failed', 'requires_review'];

/** `pay_` and a ULID (Crockford base32): what newPaymentId makes, and all a payment id can be. */
export const PAYMENT_ID_PATTERN = /^pay_[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * The payment object of the public API, in the field order the README
 * documents. A class so that the OpenAPI document describes the very shape
 * the code returns.
 */
export class PaymentResource {
  @ApiProperty({ example: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B', pattern: PAYMENT_ID_PATTERN.source })
  id!: string;

  @ApiProperty({ enum: ['payment'] })
  object!: 'payment';

  @ApiProperty({ description: 'Integer minor units.', example: 500, minimum: 1, maximum: 99_999_999 })
  amount!: number;

  @ApiProperty({ example: 'USD' })
  currency!: string;

  @ApiProperty({
    enum: PAYMENT_STATUSES,
    description: 'succeeded and failed are final; requires_review moves once, to what the provider says.',
  })
  status!: PaymentStatus;

  @ApiProperty({ example: 'pm_card_ok' })
  payment_method!: string;

  @ApiProperty({ type: String, nullable: true, example: 'ord_77' })
  order_id!: string | null;

  @ApiProperty({ type: String, nullable: true })
  description!: string | null;

  @ApiProperty({ type: 'object', additionalProperties: { type: 'string' }, example: {} })
  metadata!: Record<string, string>;

  @ApiProperty({ type: String, nullable: true, example: 'ch_01JDQ2ZC4R5S8V9W0X1Y2Z3A4C' })
  provider_charge_id!: string | null;

  @ApiProperty({ type: String, nullable: true, example: null })
  failure_code!: string | null;

  @ApiProperty({ type: String, nullable: true, example: null })
  failure_message!: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ format: 'date-time' })
  updated_at!: string;
}

class DeclineBody extends ErrorBody {
  @ApiProperty({ type: PaymentResource, description: 'The failed payment.' })
  payment!: PaymentResource;
}

/** A 402: the error envelope with the declined payment in it. */
export class DeclineEnvelope {
  @ApiProperty({ type: DeclineBody })
  error!: DeclineBody;
}

/** A page of payments, newest first. */
export class PaymentList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [PaymentResource] })
  data!: PaymentResource[];

  @ApiProperty({ description: 'Whether a page follows: ask again with starting_after = the last id.' })
  has_more!: boolean;
}

/** ULIDs sort by creation time, which keeps the newest-first list index-friendly. */
export function newPaymentId(): string {
  return `pay_${newUlid()}`;
}

/**
 * The provider's idempotency key for a payment. Derived from the payment id and
 * nothing else, so every call for one payment (a retry in the request, a
 * resumed request, the reconciliation worker) presents the same key and the
 * provider charges at most once.
 */
export function providerKeyFor(paymentId: string): string {
  return `pk_${paymentId}`;
}

/** A new pending payment as a validated request describes it, with its own id and the provider key derived from it. */
export function newPendingPayment(clientId: string, body: CreatePaymentDto): NewPayment {
  const id = newPaymentId();
  return {
    id,
    clientId,
    amount: body.amount,
    currency: body.currency,
    paymentMethod: body.payment_method,
    orderId: body.order_id ?? null,
    description: body.description ?? null,
    metadata: body.metadata ?? {},
    providerKey: providerKeyFor(id),
  };
}

/** What the provider is asked to charge for a payment, by the request and the worker alike. */
export function chargeInputFor(payment: Payment): ChargeInput {
  return {
    providerKey: payment.providerKey,
    amount: payment.amount,
    currency: payment.currency,
    paymentMethod: payment.paymentMethod,
    reference: payment.id,
  };
}

/**
 * `updatedAt`: the payment's updated_at as the API writes it, when it is not
 * the record's own (see JsonAroundUpdatedAt, payment-outcome.ts).
 */
export function toResource(payment: Payment, updatedAt: string = payment.updatedAt.toISOString()): PaymentResource {
  return {
    id: payment.id,
    object: 'payment',
    amount: payment.amount,
    currency: payment.currency,
    status: payment.status,
    payment_method: payment.paymentMethod,
    order_id: payment.orderId,
    description: payment.description,
    metadata: payment.metadata,
    provider_charge_id: payment.providerChargeId,
    failure_code: payment.failureCode,
    failure_message: payment.failureMessage,
    created_at: payment.createdAt.toISOString(),
    updated_at: updatedAt,
  };
}

