import fc from 'fast-check';
import { type ProviderCharge, parseProviderCharge } from './provider-charge';
import { anyString, anyValue, codePoints, poison, poisoned, storable, storableString } from './provider-strings.fixture';

/**
 * parseProviderCharge against the contract of issue 23, for any body a
 * provider (or anyone able to answer in its place) may send: it returns
 * undefined, or a charge the payments table stores as it is. Every string is
 * storable (no U+0000, no lone surrogate), the id is 1 to 255 code points and
 * failure_code at most 100, counted in code points as Postgres' length()
 * counts them. An answer that is not usable is never repaired into one: what
 * is returned is the body's own values.
 */

const ID_MAX = 255;
const FAILURE_CODE_MAX = 100;
const STATUSES = ['succeeded', 'failed', 'pending'];

/** A charge body, each of its fields well-formed, or of another value or type, or missing, with extra fields now and then. */
const chargeLike: fc.Arbitrary<Record<string, unknown>> = fc
  .record(
    {
      id: fc.oneof(anyString, anyValue),
      status: fc.oneof(fc.constantFrom(...STATUSES), fc.constantFrom('refunded', 'SUCCEEDED', 'succeeded\u0000', ''), anyValue),
      amount: fc.oneof(fc.nat({ max: 99_999_999 }), anyValue),
      currency: fc.oneof(fc.constantFrom('USD', 'EUR', 'JPY'), fc.constantFrom('usd', 'US', 'USD\u0000', 'ＵＳＤ'), anyValue),
      failure_code: fc.oneof(fc.constant(null), anyString, anyValue),
      extra: anyValue,
      reference: anyString,
    },
    { requiredKeys: [] },
  );

const anyBody: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: chargeLike, weight: 8 },
  { arbitrary: chargeLike.map((body) => [body]), weight: 1 },
  { arbitrary: fc.anything({ maxDepth: 2 }), weight: 1 },
  // As the wire brings them: the text of a body, parsed.
  { arbitrary: chargeLike.map((body) => JSON.parse(JSON.stringify(body)) as unknown), weight: 2 },
);

/** A charge the contract says must be read: every string storable and within its cap, however it is spelled. */
const wellFormed: fc.Arbitrary<ProviderCharge> = fc.record({
  id: storableString(1, ID_MAX),
  status: fc.constantFrom(...(STATUSES as ProviderCharge['status'][])),
  amount: fc.nat({ max: 99_999_999 }),
  currency: fc.constantFrom('USD', 'EUR', 'JPY'),
  failure_code: fc.oneof(fc.constant(null), storableString(1, FAILURE_CODE_MAX)),
});

describe('parseProviderCharge, for any body', () => {
  it('returns undefined, or a charge whose every string is storable and within its cap in code points', () => {
    fc.assert(
      fc.property(anyBody, (body) => {
        const charge = parseProviderCharge(body);
        if (charge === undefined) return;
        expect(Object.keys(charge).sort()).toEqual(['amount', 'currency', 'failure_code', 'id', 'status']);
        expect(typeof charge.id).toBe('string');
        expect(storable(charge.id)).toBe(true);
        expect(codePoints(charge.id)).toBeGreaterThanOrEqual(1);
        expect(codePoints(charge.id)).toBeLessThanOrEqual(ID_MAX);
        expect(STATUSES).toContain(charge.status);
        expect(Number.isSafeInteger(charge.amount) && charge.amount >= 0).toBe(true);
        expect(charge.currency).toMatch(/^[A-Z]{3}$/);
        if (charge.failure_code !== null) {
          expect(typeof charge.failure_code).toBe('string');
          expect(storable(charge.failure_code)).toBe(true);
          expect(codePoints(charge.failure_code)).toBeLessThanOrEqual(FAILURE_CODE_MAX);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('never repairs an answer: a charge returned holds the body’s own values', () => {
    fc.assert(
      fc.property(chargeLike, (body) => {
        const charge = parseProviderCharge(body);
        if (charge === undefined) return;
        expect(charge).toEqual({
          id: body.id,
          status: body.status,
          amount: body.amount,
          currency: body.currency,
          failure_code: body.failure_code,
        });
      }),
      { numRuns: 1_000 },
    );
  });

  it('never reads a body holding U+0000 or a lone surrogate in id or failure_code', () => {
    fc.assert(
      fc.property(wellFormed, poison, fc.constantFrom('id', 'failure_code'), fc.nat(), (charge, bad, field, at) => {
        expect(parseProviderCharge({ ...charge, [field]: poisoned(charge[field] ?? 'do_not_honor', bad, at) })).toBeUndefined();
      }),
    );
  });

  it('never reads an id past 255 code points or a failure_code past 100, however few UTF-16 units they take', () => {
    fc.assert(
      fc.property(
        wellFormed,
        fc.constantFrom('x', '😀', '❤️', 'e\u0301'),
        fc.integer({ min: 1, max: 60 }),
        (charge, unit, over) => {
          const id = unit.repeat(Math.ceil((ID_MAX + over) / codePoints(unit)));
          const failureCode = unit.repeat(Math.ceil((FAILURE_CODE_MAX + over) / codePoints(unit)));
          expect(parseProviderCharge({ ...charge, id })).toBeUndefined();
          expect(parseProviderCharge({ ...charge, status: 'failed', failure_code: failureCode })).toBeUndefined();
        },
      ),
    );
  });

  it('reads every well-formed charge, astral characters and grapheme clusters up to the caps included', () => {
    fc.assert(
      fc.property(wellFormed, (charge) => {
        expect(parseProviderCharge({ ...charge, reference: 'pay_1' })).toEqual(charge);
      }),
      { numRuns: 500 },
    );
    // At the caps exactly, where UTF-16 counts twice as many units.
    const atCaps = { id: '😀'.repeat(ID_MAX), status: 'failed', amount: 500, currency: 'USD', failure_code: '𝒜'.repeat(FAILURE_CODE_MAX) };
    expect(parseProviderCharge(atCaps)).toEqual(atCaps);
  });
});
