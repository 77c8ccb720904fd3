import { ApiProperty } from '@nestjs/swagger';
import type { OperationStatus } from './operation';
import { PAYMENT_ID_PATTERN } from './payment-id';
import { REFUND_ID_PATTERN } from './refund-id';
import { REFUND_REASONS, type Refund, type RefundReason } from './refunds.table';

const STATUSES: readonly OperationStatus[] = ['pending', 'succeeded', 'failed', 'requires_review'];

/** The refund object of the public API, in the field order the docs give. */
export class RefundResource {
  @ApiProperty({ example: 're_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B', pattern: REFUND_ID_PATTERN.source })
  id!: string;

  @ApiProperty({ enum: ['refund'] })
  object!: 'refund';

  @ApiProperty({ description: 'The payment refunded.', pattern: PAYMENT_ID_PATTERN.source })
  payment!: string;

  @ApiProperty({ description: 'Integer minor units.', example: 300, minimum: 1, maximum: 99_999_999 })
  amount!: number;

  @ApiProperty({ example: 'USD', description: "The payment's currency." })
  currency!: string;

  @ApiProperty({
    enum: STATUSES,
    description: 'succeeded and failed are final; requires_review moves once, to what the provider says.',
  })
  status!: OperationStatus;

  @ApiProperty({ enum: REFUND_REASONS, nullable: true, example: null })
  reason!: RefundReason | null;

  @ApiProperty({ type: 'object', additionalProperties: { type: 'string' }, example: {} })
  metadata!: Record<string, string>;

  @ApiProperty({ type: String, nullable: true, example: 'rf_01JDQ2ZC4R5S8V9W0X1Y2Z3A4C' })
  provider_refund_id!: string | null;

  @ApiProperty({ type: String, nullable: true, example: null })
  failure_code!: string | null;

  @ApiProperty({ type: String, nullable: true, example: null })
  failure_message!: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ format: 'date-time' })
  updated_at!: string;
}

/** `updatedAt`: the refund's updated_at as the API writes it, when it is not the record's own (see aroundUpdatedAt). */
export function toRefundResource(refund: Refund, updatedAt: string = refund.updatedAt.toISOString()): RefundResource {
  return {
    id: refund.id,
    object: 'refund',
    payment: refund.paymentId,
    amount: refund.amount,
    currency: refund.currency,
    status: refund.status,
    reason: refund.reason,
    metadata: refund.metadata,
    provider_refund_id: refund.providerRefundId,
    failure_code: refund.failureCode,
    failure_message: refund.failureMessage,
    created_at: refund.createdAt.toISOString(),
    updated_at: updatedAt,
  };
}
