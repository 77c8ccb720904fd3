import { ValidationPipe } from '@nestjs/common';
import { IsInt, IsNotEmpty, IsPositive, IsString, Matches } from 'class-validator';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import type { ChargeParams } from './mock-provider.types';

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

/** Rejects unknown fields and wrong types (no implicit conversion) in the provider's error shape. */
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
