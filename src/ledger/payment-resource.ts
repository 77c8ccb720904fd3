import { ApiProperty } from '@nestjs/swagger';
import { PAYMENT_ID_PATTERN } from './payment-id';
import type { Payment, PaymentStatus } from './payments.table';

const PAYMENT_STATUSES: readonly PaymentStatus[] = ['pending', 'succeeded', 'failed', 'requires_review'];

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

  @ApiProperty({
    description: 'The sum of its succeeded refunds, in minor units. A stored replay keeps the figure it was first answered with.',
    example: 0,
  })
  amount_refunded!: number;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ format: 'date-time' })
  updated_at!: string;
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
    amount_refunded: payment.amountRefunded,
    created_at: payment.createdAt.toISOString(),
    updated_at: updatedAt,
  };
}

