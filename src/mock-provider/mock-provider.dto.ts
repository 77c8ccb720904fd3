import { createParamDecorator, ExecutionContext, ValidationPipe } from '@nestjs/common';
import type { Request } from 'express';
import { IsInt, IsNotEmpty, IsPositive, IsString, Matches } from 'class-validator';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import type { ChargeParams, RefundParams } from './mock-provider.types';

/** The provider idempotency key of a charge or refund request: required, as a real processor's is. */
export const IdempotencyKey = createParamDecorator(
  (_data: unknown, context: ExecutionContext): string => {
    const key = context.switchToHttp().getRequest<Request>().header('Idempotency-Key');
    if (!key) {
      throw new MockProviderError(
        MockProviderErrorCode.IdempotencyKeyMissing,
        'The Idempotency-Key header is required',
      );
    }
    return key;
  },
);

export class CreateChargeDto implements ChargeParams {
  @IsInt()
  @IsPositive()
  amount!: number;

  @IsString()
  @Matches(/^[A-Z]{3}$/, { message: 'currency must be 3 upper-case letters' })
  currency!: string;

  @IsString()
  @IsNotEmpty()
  payment_method!: string;

  @IsString()
  @IsNotEmpty()
  reference!: string;
}

export class CreateRefundDto implements RefundParams {
  @IsString()
  @IsNotEmpty()
  charge!: string;

  @IsInt()
  @IsPositive()
  amount!: number;

  @IsString()
  @IsNotEmpty()
  reference!: string;
}

/**
 * Rejects unknown fields and wrong types (no implicit conversion), in the
 * provider's error shape.
 */
export function mockProviderValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors) => {
      const unknown = errors.find((error) => error.constraints?.whitelistValidation);
      const shown = unknown ?? errors[0];
      return new MockProviderError(
        unknown ? MockProviderErrorCode.ParameterUnknown : MockProviderErrorCode.ParameterInvalid,
        Object.values(shown?.constraints ?? {}).join('; ') || 'The request body is invalid',
      );
    },
  });
}
