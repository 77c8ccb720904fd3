import { IsDefined, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { CodePointLength } from '../common/code-point-length';
import { PageQueryDto } from '../common/page-query.dto';
import { MetadataField } from '../common/metadata-field';
import { PAYMENT_ID_PATTERN } from '../ledger/payment-id';

/** Currencies the provider settles; amounts are in their minor units. */
const SUPPORTED_CURRENCIES = [
  'AUD', 'BRL', 'CAD', 'CHF', 'CZK', 'DKK', 'EUR', 'GBP', 'HKD', 'INR', 'JPY',
  'MXN', 'NOK', 'NZD', 'PLN', 'SEK', 'SGD', 'USD', 'ZAR',
] as const;

/**
 * The limits of a payment's fields, in code points, as the schema's column
 * types count them (payment_method_token, order_reference, description_text,
 * metadata_object): a value these let through is one Postgres stores.
 */
export const PAYMENT_METHOD_MAX_LENGTH = 255;
export const ORDER_ID_MAX_LENGTH = 64;
export const DESCRIPTION_MAX_LENGTH = 500;

/**
 * Body of POST /v1/payments. Types are strict: "500" is not an amount. A
 * property's checks run from presence to type to range, in the order written:
 * the first that fails is the one reported (see common/validation.ts).
 */
export class CreatePaymentDto {
  @ApiProperty({ type: 'integer', description: 'Integer minor units; "500" (a string) is refused.', minimum: 1, maximum: 99_999_999, example: 500 })
  @IsDefined({ message: 'amount is required' })
  @IsInt({ message: 'amount must be an integer number of minor units' })
  @Min(1, { message: 'amount must be at least 1' })
  @Max(99_999_999, { message: 'amount must be at most 99999999' })
  amount!: number;

  @ApiProperty({ enum: SUPPORTED_CURRENCIES, example: 'USD' })
  @IsDefined({ message: 'currency is required' })
  @IsString({ message: 'currency must be a string' })
  @Matches(/^[A-Z]{3}$/, { message: 'currency must be three upper-case letters (ISO 4217)' })
  @IsIn(SUPPORTED_CURRENCIES, { message: `currency must be one of ${SUPPORTED_CURRENCIES.join(', ')}` })
  currency!: string;

  @ApiProperty({
    minLength: 1,
    maxLength: 255,
    example: 'pm_card_ok',
    description: 'A card token; the mock provider\'s test cards (docs/api.md) choose its behaviour.',
  })
  @IsDefined({ message: 'payment_method is required' })
  @IsString({ message: 'payment_method must be a string' })
  @CodePointLength(1, PAYMENT_METHOD_MAX_LENGTH, { message: `payment_method must be 1 to ${PAYMENT_METHOD_MAX_LENGTH} characters` })
  payment_method!: string;

  @ApiPropertyOptional({
    minLength: 1,
    maxLength: 64,
    example: 'ord_77',
    description: 'The business fact: one payment that did not fail per order.',
  })
  @IsOptional()
  @IsString({ message: 'order_id must be a string' })
  @CodePointLength(1, ORDER_ID_MAX_LENGTH, { message: `order_id must be 1 to ${ORDER_ID_MAX_LENGTH} characters` })
  order_id?: string;

  @ApiPropertyOptional({ maxLength: DESCRIPTION_MAX_LENGTH })
  @IsOptional()
  @IsString({ message: 'description must be a string' })
  @CodePointLength(0, DESCRIPTION_MAX_LENGTH, { message: `description must be at most ${DESCRIPTION_MAX_LENGTH} characters` })
  description?: string;

  @MetadataField()
  metadata?: Record<string, string>;
}

export class ListPaymentsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ description: 'The id of the last payment of the previous page.', pattern: PAYMENT_ID_PATTERN.source })
  @IsOptional()
  @IsString({ message: 'starting_after must be a payment id' })
  @Matches(PAYMENT_ID_PATTERN, { message: 'starting_after must be a payment id' })
  starting_after?: string;
}
