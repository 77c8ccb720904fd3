import { QueryFailedError } from 'typeorm';
import { isUniqueViolation, limitLiteral } from './sql';

describe('isUniqueViolation', () => {
  const violation = Object.assign(new Error('duplicate key'), { code: '23505', constraint: 'payments_client_order_active_key' });

  it('reads the violated constraint through TypeORM’s wrapper and from pg’s own error', () => {
    expect(isUniqueViolation(new QueryFailedError('INSERT', [], violation), 'payments_client_order_active_key')).toBe(true);
    expect(isUniqueViolation(violation, 'payments_client_order_active_key')).toBe(true);
  });

  it('is false for another constraint, another error, or no error object at all', () => {
    expect(isUniqueViolation(violation, 'events_payment_type_key')).toBe(false);
    expect(isUniqueViolation(Object.assign(new Error('x'), { code: '23503' }), 'events_payment_type_key')).toBe(false);
    expect(isUniqueViolation(undefined, 'events_payment_type_key')).toBe(false);
  });
});

describe('limitLiteral', () => {
  it('writes a positive integer, and refuses anything else', () => {
    expect(limitLiteral(1_000)).toBe('1000');
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => limitLiteral(bad)).toThrow('a LIMIT must be a positive integer');
    }
  });
});
