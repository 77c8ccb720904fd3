import { type ArgumentMetadata, ValidationPipe, type ValidationError } from '@nestjs/common';
import { DomainError, ErrorCode } from './domain-error';

const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** The path of the first key, at any depth, that names object machinery rather than data. */
function reservedKeyPath(value: object, prefix = ''): string | undefined {
  for (const [key, child] of Object.entries(value)) {
    const path = `${prefix}${key}`;
    if (RESERVED_KEYS.has(key)) return path;
    if (typeof child === 'object' && child !== null) {
      const nested = reservedKeyPath(child, `${path}.`);
      if (nested) return nested;
    }
  }
  return undefined;
}

/**
 * Of a property's failed checks, the one written first: class-validator runs
 * IsDefined before the rest and lists the others last decorator first, so
 * "amount is required" or "must be an integer" wins over a range that a
 * missing or mistyped value fails too.
 */
function firstWritten(constraints: Record<string, string>): [string, string] {
  if (constraints.isDefined !== undefined) return ['isDefined', constraints.isDefined];
  const entries = Object.entries(constraints);
  return entries[entries.length - 1];
}

function firstProblem(errors: ValidationError[], prefix = ''): { param: string; message: string } {
  const error = errors[0];
  const param = `${prefix}${error.property}`;
  if (error.constraints) {
    const [constraint, message] = firstWritten(error.constraints);
    return constraint === 'whitelistValidation'
      ? { param, message: `Unknown parameter: ${param}.` }
      : { param, message: message.endsWith('.') ? message : `${message}.` };
  }
  return firstProblem(error.children ?? [], `${param}.`);
}

/**
 * Strict validation: unknown fields are refused rather than dropped, no type is
 * coerced ("500" is not an amount), and the first problem is reported in the
 * error envelope with the field in `param`.
 */
export class StrictValidationPipe extends ValidationPipe {
  constructor() {
    super({
      whitelist: true,
      forbidNonWhitelisted: true,
      transform: true,
      transformOptions: { enableImplicitConversion: false },
      validationError: { target: false, value: false },
      exceptionFactory: (errors) => {
        const { param, message } = firstProblem(errors);
        return new DomainError(ErrorCode.ParameterInvalid, message, { param });
      },
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body') {
      if (value === undefined) {
        throw new DomainError(
          ErrorCode.ParameterInvalid,
          'Send the body as a JSON object with Content-Type: application/json.',
        );
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new DomainError(ErrorCode.ParameterInvalid, 'The request body must be a JSON object.');
      }
      const reserved = reservedKeyPath(value);
      if (reserved) {
        // class-transformer treats these names as the object's own machinery:
        // it would drop them silently or throw, instead of refusing them.
        throw new DomainError(ErrorCode.ParameterInvalid, `Unknown parameter: ${reserved}.`, { param: reserved });
      }
    }
    return super.transform(value, metadata);
  }
}
