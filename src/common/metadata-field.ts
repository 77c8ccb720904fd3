import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsOptional, ValidateBy, type ValidationOptions } from 'class-validator';
import { codePointLength } from './unicode';

/**
 * The limits of `metadata`, in code points, as the schema's check counts
 * them (payment_metadata_is_valid, on payments and refunds alike): a value
 * these let through is one Postgres stores.
 */
export const METADATA_MAX_KEYS = 20;
export const METADATA_MAX_KEY_LENGTH = 40;
export const METADATA_MAX_VALUE_LENGTH = 500;

function IsMetadata(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isMetadata',
      validator: {
        validate: (value: unknown) => {
          if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
          const entries = Object.entries(value);
          return (
            entries.length <= METADATA_MAX_KEYS &&
            entries.every(
              ([key, item]) =>
                key.length >= 1 &&
                codePointLength(key) <= METADATA_MAX_KEY_LENGTH &&
                typeof item === 'string' &&
                codePointLength(item) <= METADATA_MAX_VALUE_LENGTH,
            )
          );
        },
        defaultMessage: () =>
          `metadata must be an object of at most ${METADATA_MAX_KEYS} string values, ` +
          `keys of 1 to ${METADATA_MAX_KEY_LENGTH} characters, values of at most ${METADATA_MAX_VALUE_LENGTH}`,
      },
    },
    options,
  );
}

/**
 * The optional `metadata` of a body (a payment's, a refund's): documented,
 * optional, and checked as sent.
 */
export function MetadataField(): PropertyDecorator {
  return applyDecorators(
    ApiPropertyOptional({
      type: 'object',
      additionalProperties: { type: 'string', maxLength: METADATA_MAX_VALUE_LENGTH },
      maxProperties: METADATA_MAX_KEYS,
      description: `Up to ${METADATA_MAX_KEYS} string values, keys of 1 to ${METADATA_MAX_KEY_LENGTH} characters.`,
    }),
    IsOptional(),
    // The object as sent: class-transformer would copy it key by key and drop
    // those named like Object.prototype's members (toString, valueOf), so a
    // row would be made without them and nothing said.
    Transform(({ obj }: { obj: { metadata?: unknown } }) => obj.metadata, { toClassOnly: true }),
    IsMetadata(),
  );
}

