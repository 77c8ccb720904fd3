import fc from 'fast-check';
import { type ProviderRefund, parseProviderRefund } from './provider-refund';
import { anyString, anyValue, codePoints, poison, poisoned, storable, storableString } from './provider-strings.fixture';

/**
 * parseProviderRefund against the contract parseProviderCharge keeps, for any
 * body a provider (or anyone able to answer in its place) may send: it returns
 * undefined, or a refund whose every string is storable as it is (no U+0000,
 * no lone surrogate), the id and the charge's id 1 to 255 code points and
 * failure_code at most 100, counted in code points as Postgres' length()
 * counts them, and whose amount is a positive safe integer. An answer that is
 * not usable is never repaired into one: what is returned is the body's own
 * values.
 */

const ID_MAX = 255;
const FAILURE_CODE_MAX = 100;
const STATUSES = ['succeeded', 'failed', 'pending'];
const STRING_FIELDS = ['id', 'charge', 'failure_code'] as const;

/** A refund body, each of its fields well-formed, or of another value or type, or missing, with extra fields now and then. */
const refundLike: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    id: fc.oneof(anyString, anyValue),
    status: fc.oneof(fc.constantFrom(...STATUSES), fc.constantFrom('refunded', 'SUCCEEDED', 'succeeded\u0000', ''), anyValue),
    amount: fc.oneof(fc.integer({ min: 1, max: 99_999_999 }), fc.constantFrom(0, Number.MAX_SAFE_INTEGER), anyValue),
    charge: fc.oneof(anyString, anyValue),
    failure_code: fc.oneof(fc.constant(null), anyString, anyValue),
    object: fc.oneof(fc.constant('refund'), anyValue),
    currency: anyValue,
    reference: anyString,
  },
  { requiredKeys: [] },
);

const anyBody: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: refundLike, weight: 8 },
  { arbitrary: refundLike.map((body) => [body]), weight: 1 },
  { arbitrary: fc.anything({ maxDepth: 2 }), weight: 1 },
  // As the wire brings them: the text of a body, parsed.
  { arbitrary: refundLike.map((body) => JSON.parse(JSON.stringify(body)) as unknown), weight: 2 },
);

/** A refund the contract says must be read: every string storable and within its cap, however it is spelled. */
const wellFormed: fc.Arbitrary<ProviderRefund> = fc.record({
  id: storableString(1, ID_MAX),
  status: fc.constantFrom(...(STATUSES as ProviderRefund['status'][])),
  amount: fc.oneof(fc.integer({ min: 1, max: 99_999_999 }), fc.constant(Number.MAX_SAFE_INTEGER)),
  charge: storableString(1, ID_MAX),
  failure_code: fc.oneof(fc.constant(null), storableString(1, FAILURE_CODE_MAX)),
});

describe('parseProviderRefund, for any body', () => {
  it('returns undefined, or a refund whose every string is storable and within its cap in code points', () => {
    fc.assert(
      fc.property(anyBody, (body) => {
        const refund = parseProviderRefund(body);
        if (refund === undefined) return;
        expect(Object.keys(refund).sort()).toEqual(['amount', 'charge', 'failure_code', 'id', 'status']);
        for (const [text, max] of [[refund.id, ID_MAX], [refund.charge, ID_MAX]] as const) {
          expect(typeof text).toBe('string');
          expect(storable(text)).toBe(true);
          expect(codePoints(text)).toBeGreaterThanOrEqual(1);
          expect(codePoints(text)).toBeLessThanOrEqual(max);
        }
        expect(STATUSES).toContain(refund.status);
        expect(Number.isSafeInteger(refund.amount) && refund.amount >= 1).toBe(true);
        if (refund.failure_code !== null) {
          expect(typeof refund.failure_code).toBe('string');
          expect(storable(refund.failure_code)).toBe(true);
          expect(codePoints(refund.failure_code)).toBeGreaterThanOrEqual(1);
          expect(codePoints(refund.failure_code)).toBeLessThanOrEqual(FAILURE_CODE_MAX);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('never repairs an answer: a refund returned holds the body’s own values', () => {
    fc.assert(
      fc.property(refundLike, (body) => {
        const refund = parseProviderRefund(body);
        if (refund === undefined) return;
        expect(refund).toEqual({
          id: body.id,
          status: body.status,
          amount: body.amount,
          charge: body.charge,
          failure_code: body.failure_code,
        });
      }),
      { numRuns: 1_000 },
    );
  });

  it('never reads a body holding U+0000 or a lone surrogate in id, charge or failure_code', () => {
    fc.assert(
      fc.property(wellFormed, poison, fc.constantFrom(...STRING_FIELDS), fc.nat(), (refund, bad, field, at) => {
        expect(parseProviderRefund({ ...refund, [field]: poisoned(refund[field] ?? 'refund_declined', bad, at) })).toBeUndefined();
      }),
    );
  });

  it('never reads an id or a charge past 255 code points or a failure_code past 100, however few UTF-16 units they take', () => {
    fc.assert(
      fc.property(
        wellFormed,
        fc.constantFrom('x', '😀', '❤️', 'e\u0301'),
        fc.integer({ min: 1, max: 60 }),
        (refund, unit, over) => {
          const long = unit.repeat(Math.ceil((ID_MAX + over) / codePoints(unit)));
          const failureCode = unit.repeat(Math.ceil((FAILURE_CODE_MAX + over) / codePoints(unit)));
          expect(parseProviderRefund({ ...refund, id: long })).toBeUndefined();
          expect(parseProviderRefund({ ...refund, charge: long })).toBeUndefined();
          expect(parseProviderRefund({ ...refund, status: 'failed', failure_code: failureCode })).toBeUndefined();
        },
      ),
    );
  });

  it('never reads an amount that is not a positive safe integer', () => {
    const notAnAmount = fc.oneof(
      fc.integer({ max: 0 }),
      fc.double().filter((amount) => !Number.isSafeInteger(amount) || amount < 1),
      fc.constantFrom(Number.MAX_SAFE_INTEGER + 1, -0, '400', null),
    );
    fc.assert(
      fc.property(wellFormed, notAnAmount, (refund, amount) => {
        expect(parseProviderRefund({ ...refund, amount })).toBeUndefined();
      }),
    );
  });

  it('reads every well-formed refund, astral characters and grapheme clusters up to the caps included', () => {
    fc.assert(
      fc.property(wellFormed, (refund) => {
        expect(parseProviderRefund({ ...refund, object: 'refund', currency: 'EUR', reference: 're_1' })).toEqual(refund);
      }),
      { numRuns: 500 },
    );
    // At the caps exactly, where UTF-16 counts twice as many units.
    const atCaps = {
      id: '😀'.repeat(ID_MAX),
      status: 'failed',
      amount: 400,
      charge: '𝒜'.repeat(ID_MAX),
      failure_code: '𝒜'.repeat(FAILURE_CODE_MAX),
    };
    expect(parseProviderRefund(atCaps)).toEqual(atCaps);
  });
});
