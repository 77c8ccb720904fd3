import { ValidateBy, type ValidationOptions } from 'class-validator';
import { codePointLength } from './unicode';

/**
 * A string of `min` to `max` Unicode code points: what Postgres' length()
 * counts, and so what the schema's checks count. class-validator's Length
 * counts otherwise (it subtracts variation selectors and counts a surrogate
 * pair once), which let 40 × "❤️" (80 code points) through a 64 limit and
 * into a check violation.
 */
export function CodePointLength(min: number, max: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'codePointLength',
      constraints: [min, max],
      validator: {
        validate: (value: unknown) => {
          if (typeof value !== 'string') return false;
          const length = codePointLength(value);
          return length >= min && length <= max;
        },
        defaultMessage: (args) => `${args?.property ?? 'the value'} must be ${min} to ${max} characters`,
      },
    },
    options,
  );
}
