import type { ArgumentMetadata } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { StrictValidationPipe } from '../common/validation';
import { CreatePaymentDto, ListPaymentsQueryDto } from './payments.dto';

const pipe = new StrictValidationPipe();
const valid = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' };

async function problem(value: unknown, metadata: ArgumentMetadata): Promise<{ param?: string; message: string } | undefined> {
  try {
    await pipe.transform(value, metadata);
    return undefined;
  } catch (error) {
    return { param: (error as DomainError).details.param, message: (error as DomainError).message };
  }
}

const body = (value: unknown) => problem(value, { type: 'body', metatype: CreatePaymentDto });
const query = (value: unknown) => problem(value, { type: 'query', metatype: ListPaymentsQueryDto });

describe('payment body messages', () => {
  it.each([
    ['amount missing', { currency: 'USD', payment_method: 'pm_card_ok' }, 'amount', 'amount is required.'],
    ['amount null', { ...valid, amount: null }, 'amount', 'amount is required.'],
    ['amount a string', { ...valid, amount: '500' }, 'amount', 'amount must be an integer number of minor units.'],
    ['amount a fraction', { ...valid, amount: 1.5 }, 'amount', 'amount must be an integer number of minor units.'],
    ['amount zero', { ...valid, amount: 0 }, 'amount', 'amount must be at least 1.'],
    ['amount too large', { ...valid, amount: 100_000_000 }, 'amount', 'amount must be at most 99999999.'],
    ['currency missing', { amount: 500, payment_method: 'pm_card_ok' }, 'currency', 'currency is required.'],
    ['currency a number', { ...valid, currency: 840 }, 'currency', 'currency must be a string.'],
    ['currency lower case', { ...valid, currency: 'usd' }, 'currency', 'currency must be three upper-case letters (ISO 4217).'],
    ['payment_method missing', { amount: 500, currency: 'USD' }, 'payment_method', 'payment_method is required.'],
    ['payment_method empty', { ...valid, payment_method: '' }, 'payment_method', 'payment_method must be 1 to 255 characters.'],
    ['order_id a number', { ...valid, order_id: 7 }, 'order_id', 'order_id must be a string.'],
  ])('reports %s as the real problem', async (_case, value, param, message) => {
    expect(await body(value)).toEqual({ param, message });
  });

  it('accepts a valid body', async () => {
    expect(await body(valid)).toBeUndefined();
  });
});

describe('list query numbers', () => {
  it.each(['abc', '0x10', '0b11', '0o7', '1e1', ' 5 ', '5 ', '', '5.0', '+5', ['5', '6']])(
    'refuses limit=%j as not an integer',
    async (limit) => {
      expect(await query({ limit })).toEqual({ param: 'limit', message: 'limit must be an integer.' });
    },
  );

  it.each([
    ['0', 'limit must be at least 1.'],
    ['-1', 'limit must be at least 1.'],
    ['101', 'limit must be at most 100.'],
  ])('checks the range of limit=%s', async (limit, message) => {
    expect(await query({ limit })).toEqual({ param: 'limit', message });
  });

  it('reads plain decimal digits as the number', async () => {
    expect(await pipe.transform({ limit: '007' }, { type: 'query', metatype: ListPaymentsQueryDto })).toEqual({ limit: 7 });
  });
});
