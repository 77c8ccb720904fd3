import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { CodePointLength } from '../common/code-point-length';
import { PageQueryDto } from '../common/page-query.dto';
import { PAYMENT_ID_PATTERN } from '../ledger/payment-id';
import { REFUND_ID_PATTERN } from '../ledger/refund-id';
import { REFUND_REASONS, type RefundReason } from '../ledger/refunds.table';
import { MetadataField } from '../common/metadata-field';

/**
 * Body of POST /v1/refunds, as strict as a payment's. Whether the payment
 * exists, is refundable and has `amount` left is the claim's to say, under
 * the payment's lock: those are 404, 409 and 400 amount_too_large, not
 * validation errors.
 */
export class CreateRefundDto {
  @ApiProperty({ description: 'The id of one of your payments.', example: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B' })
  @IsDefined({ message: 'payment is required' })
  @IsString({ message: 'payment must be a payment id' })
  @CodePointLength(1, 255, { message: 'payment must be a payment id' })
  payment!: string;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 99_999_999,
    example: 300,
    description: 'Integer minor units, at most what is left to refund; default: all that is left.',
  })
  @IsOptional()
  @IsInt({ message: 'amount must be an integer number of minor units' })
  @Min(1, { message: 'amount must be at least 1' })
  @Max(99_999_999, { message: 'amount must be at most 99999999' })
  amount?: number;

  @ApiPropertyOptional({ enum: REFUND_REASONS })
  @IsOptional()
  @IsString({ message: `reason must be one of ${REFUND_REASONS.join(', ')}` })
  @IsIn(REFUND_REASONS, { message: `reason must be one of ${REFUND_REASONS.join(', ')}` })
  reason?: RefundReason;

  @MetadataField()
  metadata?: Record<string, string>;
}

export class ListRefundsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ description: 'Only the refunds of this payment.', pattern: PAYMENT_ID_PATTERN.source })
  @IsOptional()
  @IsString({ message: 'payment must be a payment id' })
  @Matches(PAYMENT_ID_PATTERN, { message: 'payment must be a payment id' })
  payment?: string;

  @ApiPropertyOptional({ description: 'The id of the last refund of the previous page.', pattern: REFUND_ID_PATTERN.source })
  @IsOptional()
  @IsString({ message: 'starting_after must be a refund id' })
  @Matches(REFUND_ID_PATTERN, { message: 'starting_after must be a refund id' })
  starting_after?: string;
}
