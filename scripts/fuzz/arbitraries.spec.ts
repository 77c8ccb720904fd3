import fc from 'fast-check';
import { type FuzzRequest, LIMIT_PROBE_KEY_PREFIX, TEXT_MEASURES, TEXT_UNITS, fuzzRequest, nearLimit, nearLimitPairs } from './arbitraries';
import { requestBodyOf, textFieldProblems } from './properties';
import { type RunState, resolve } from './wire';

const HEART = '\u2764\ufe0f';
const codePoints = (text: string) => [...text].length;

/** Many draws of a fixed seed: what the generators make, not one run's luck. */
const sample = <T>(arbitrary: fc.Arbitrary<T>, numRuns = 3_000) => fc.sample(arbitrary, { seed: 23, numRuns });

const STATE: RunState = {
  baseUrl: 'http://127.0.0.1:3000',
  apiKeys: { A: 'sk_a', B: 'sk_b' },
  webhookSecret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`,
  ids: { payments: { A: [], B: [] }, events: { A: [], B: [] } },
};

describe('TEXT_UNITS', () => {
  it('are units whose length depends on what is counted', () => {
    const measured = TEXT_UNITS.map((unit) => Object.fromEntries(Object.entries(TEXT_MEASURES).map(([name, measure]) => [name, measure(unit)])));

    expect(measured).toEqual([
      { codePoints: 2, utf16Units: 2, graphemes: 1, validatorJs: 1 }, // ❤️
      { codePoints: 5, utf16Units: 8, graphemes: 1, validatorJs: 5 }, // 👩‍👩‍👧
      { codePoints: 1, utf16Units: 2, graphemes: 1, validatorJs: 1 }, // 𝒜
      { codePoints: 1, utf16Units: 2, graphemes: 1, validatorJs: 1 }, // 😀
      { codePoints: 2, utf16Units: 2, graphemes: 1, validatorJs: 2 }, // e + U+0301
    ]);
  });
});

describe('nearLimit', () => {
  it('draws strings at, just under and just over the limit in code points, and ❤️ at 32, 33 and 40 for 64', () => {
    const drawn = sample(nearLimit(64, 1));
    const lengths = new Set(drawn.map(codePoints));

    for (const length of [63, 64, 65, 66]) expect(lengths).toContain(length);
    for (const count of [32, 33, 40]) expect(drawn).toContain(HEART.repeat(count));
    // Within 64 as validator.js counts, 126 to 130 code points as Postgres counts.
    expect(drawn).toContain(HEART.repeat(64));
    expect(drawn).toContain(HEART.repeat(65));
    expect(drawn.every((text) => codePoints(text) >= 1)).toBe(true);
  });

  it('sits around description’s 500 with 250 and 251 × ❤️, and mixes every unit in short strings', () => {
    const drawn = sample(nearLimit(500));

    expect(drawn).toContain(HEART.repeat(250));
    expect(drawn).toContain(HEART.repeat(251));
    expect(drawn.some((text) => codePoints(text) === 500 && text.includes('\u{1F469}\u200d'))).toBe(true);
    for (const unit of TEXT_UNITS) expect(drawn.some((text) => codePoints(text) < 20 && text.includes(unit))).toBe(true);
  });
});

describe('nearLimitPairs', () => {
  it('puts one field near its limit, on both sides of it, for each of the client’s text fields', () => {
    const bodies = sample(nearLimitPairs).map((pairs) => JSON.parse(`{${pairs.map(([key, text]) => `"${key}":${text}`).join(',')}}`) as Record<string, unknown>);
    const over = new Set(bodies.flatMap((body) => textFieldProblems(body).map(({ param }) => param)));
    const within = bodies.filter((body) => textFieldProblems(body).length === 0);

    expect([...over].sort()).toEqual(['description', 'metadata', 'order_id', 'payment_method']);
    for (const field of ['order_id', 'description', 'payment_method', 'metadata']) {
      expect(within.some((body) => /[^\x20-\x7e]/.test(JSON.stringify(body[field]) ?? ''))).toBe(true);
    }
    // At most one problem: a refusal must name that field.
    expect(bodies.every((body) => textFieldProblems(body).length <= 1)).toBe(true);
  });
});

describe('fuzzRequest', () => {
  const requests = sample(fuzzRequest, 4_000);
  const isProbe = (request: FuzzRequest) =>
    request.headers.some(([name, value]) => name === 'Idempotency-Key' && value.startsWith(LIMIT_PROBE_KEY_PREFIX));

  it('sends limit probes as clean creates, whose bodies properties.ts reads back from the wire bytes', () => {
    const probes = requests.filter(isProbe);

    expect(probes.length).toBeGreaterThan(100);
    for (const probe of probes) {
      expect(probe).toMatchObject({ family: 'create', method: 'POST', auth: { kind: 'bearer', credential: 'own' }, framing: 'length' });
      const body = requestBodyOf(resolve(STATE, probe).bytes) as Record<string, unknown>;
      expect(body).toMatchObject({ amount: expect.any(Number), currency: expect.any(String) });
    }
    const bodies = probes.map((probe) => requestBodyOf(resolve(STATE, probe).bytes));
    expect(bodies.some((body) => textFieldProblems(body).length === 1)).toBe(true);
    expect(bodies.some((body) => textFieldProblems(body).length === 0)).toBe(true);
  });

  it('puts grapheme clusters, variation selectors, astral characters and combining marks in other creates too', () => {
    const texts = requests
      .filter((request) => request.family === 'create' && !isProbe(request) && request.body?.kind === 'text' && request.body.encoding === 'utf8')
      .map((request) => (request.body?.kind === 'text' ? request.body.text : ''));

    for (const unit of TEXT_UNITS) expect(texts.some((text) => text.includes(unit))).toBe(true);
  });
});

describe('resolve', () => {
  /** A read of the events list after the cursor `index` names, for a client with no events yet: an unknown id. */
  const cursorRead = (index: number): FuzzRequest => ({
    family: 'read',
    as: 'A',
    method: 'GET',
    target: { kind: 'cursor', resource: 'events', ref: { of: 'own', index }, extra: '' },
    version: 'HTTP/1.1',
    auth: { kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' },
    headers: [],
    framing: 'length',
    eol: '\r\n',
  });

  it('expects an unknown event id as a cursor refused, but one made before the retention to end the list', () => {
    const expectations = Array.from({ length: 3_000 }, (_, index) => resolve(STATE, cursorRead(index)).expect);

    expect(expectations.filter((expected) => expected?.status === 400).length).toBeGreaterThan(2_900);
    expect(expectations.filter((expected) => expected?.status === 200).length).toBeGreaterThan(0);
    expect(expectations.every((expected) => expected?.status === 400 || expected?.status === 200)).toBe(true);
  });
});
