import fc from 'fast-check';

/**
 * What the fuzzer sends, as data: a request names credentials and payments
 * symbolically (the run's client keys and the ids its payments got are only
 * known when it is sent, see wire.ts), so the same seed draws the same
 * requests on every run.
 */

export type Who = 'A' | 'B';
/** Whose API key: the sender's own, the other client's, or one that was never issued. */
export type Credential = 'own' | 'peer' | 'unknown';

export type Auth =
  | { kind: 'none' }
  | { kind: 'bearer'; credential: Credential; scheme: string; gap: string; tail: string }
  | { kind: 'literal'; value: string }
  | { kind: 'twice'; first: Credential; second: Credential };

/** The index-th (modulo their number) payment the sender or the other client has made so far. */
export interface IdRef {
  of: 'own' | 'peer';
  index: number;
}

/** The resources a client lists and reads by id: its payments, and the events announcing their outcomes. */
export type Resource = 'payments' | 'events';

export type Target =
  | { kind: 'literal'; target: string }
  /** GET /v1/<resource>/<id>: 200 for the sender's own, 404 for the other client's. */
  | { kind: 'one'; resource: Resource; ref: IdRef }
  /** GET /v1/<resource>?starting_after=<id>: another client's id is no cursor (400). */
  | { kind: 'cursor'; resource: Resource; ref: IdRef; extra: string };

export interface TextBody {
  kind: 'text';
  /** With encoding latin1, one character per byte: any bytes at all. */
  text: string;
  encoding: 'utf8' | 'utf16le' | 'latin1';
}

/** A provider event built when sent, around one of the run's payments or none. */
export interface EventBody {
  kind: 'event';
  ref: IdRef | null;
  id: string;
  type: string;
  data: Record<string, unknown>;
}

export interface Signature {
  /** Our API's webhook secret, or another one. */
  secret: 'ours' | 'other';
  skewSeconds: number;
  /** webhook-id: the event's own id, or another. */
  id: 'event' | 'other';
}

export interface FuzzRequest {
  /** Which generator made it, for the summary. */
  family: 'create' | 'read' | 'probe' | 'path' | 'event' | 'http';
  as: Who;
  method: string;
  target: Target;
  version: string;
  auth: Auth;
  /** In order, repeats allowed; values are latin1 text (a byte per character). */
  headers: [string, string][];
  body?: TextBody | EventBody;
  framing: 'length' | 'chunked';
  sign?: Signature;
  /** Lines as sent are ended with this (a bare LF is something Node refuses). */
  eol: '\r\n' | '\n';
}

/** Marks a Host header the wire writer leaves out, rather than writing its own. */
export const OMIT_HOST = '\u0000omit';

export const CURRENCIES = [
  'AUD', 'BRL', 'CAD', 'CHF', 'CZK', 'DKK', 'EUR', 'GBP', 'HKD', 'INR', 'JPY',
  'MXN', 'NOK', 'NZD', 'PLN', 'SEK', 'SGD', 'USD', 'ZAR',
];

/** Shared by both clients: the same key or order id from A and B must be two unrelated things. */
const KEY_POOL = Array.from({ length: 48 }, (_, i) => `fuzz-key-${i}`);
const ORDER_POOL = Array.from({ length: 24 }, (_, i) => `ord-${i}`);

/**
 * Test cards whose answers are all 2xx or 4xx by contract. pm_card_unavailable,
 * pm_card_flaky and the slow ones are left out on purpose: a provider that is
 * down is a 503 the contract promises, and the fuzzer's "no 5xx" is about
 * input, not about the provider.
 */
const CARDS = ['pm_card_ok', 'pm_card_ok', 'pm_card_ok', 'pm_card_declined', 'pm_card_pending'];

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

const who: fc.Arbitrary<Who> = fc.constantFrom('A', 'B');
const resource: fc.Arbitrary<Resource> = fc.constantFrom('payments', 'payments', 'events');

/** One UTF-16 code unit from the surrogate range: a lone surrogate once on its own. */
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit));

/**
 * Text whose length depends on what is counted, each unit with its code
 * points, UTF-16 units and graphemes: ❤️ (U+2764 U+FE0F: 2, 2, 1; and 1 for
 * validator.js's isLength, which drops variation selectors), the family
 * 👩‍👩‍👧 (an emoji ZWJ sequence: 5, 8, 1), the astral 𝒜 and 😀 (1, 2, 1),
 * and e + U+0301, a combining acute (2, 2, 1). The service counts every
 * limit in code points, as Postgres' length() does.
 */
export const TEXT_UNITS = ['\u2764\ufe0f', '\u{1F469}\u200d\u{1F469}\u200d\u{1F467}', '\u{1D49C}', '\u{1F600}', 'e\u0301'] as const;

/** The ways a length is counted, one of which is the service's (code points); a string near a limit in each is drawn. */
export const TEXT_MEASURES: Record<string, (text: string) => number> = {
  codePoints: (text) => [...text].length,
  utf16Units: (text) => text.length,
  graphemes: (text) => [...new Intl.Segmenter().segment(text)].length,
  // validator.js's isLength, behind class-validator's Length and MaxLength.
  validatorJs: (text) => text.length - (text.match(/[\ufe0e\ufe0f]/g)?.length ?? 0) - (text.match(/[\ud800-\udbff][\udc00-\udfff]/g)?.length ?? 0),
};

const codePointsOf = (text: string) => [...text].length;

/**
 * Strings on either side of a limit of `limit` code points (and of `min`,
 * when it is above 0): one unit of TEXT_UNITS repeated to sit at the limit,
 * one short or one over, as each measure counts it (so 32 and 33 × ❤️ for
 * 64, where validator.js sees 32 and 33, and 63 to 65 × ❤️, which it sees
 * within 64 and Postgres sees as 126 to 130); ❤️ at half the limit, one
 * more, and 5/8 of it (32, 33, 40 for 64; 250, 251, 313 for 500); the limit
 * reached exactly in code points with ASCII before the units, ±1; and short
 * strings mixing every unit.
 */
export function nearLimit(limit: number, min = 0): fc.Arbitrary<string> {
  const unit = fc.constantFrom(...TEXT_UNITS);
  return fc.oneof(
    fc
      .tuple(unit, fc.constantFrom(...Object.values(TEXT_MEASURES)), fc.integer({ min: -1, max: 1 }))
      .map(([one, measure, step]) => one.repeat(Math.max(1, Math.floor(limit / measure(one)) + step))),
    fc.constantFrom(Math.floor(limit / 2), Math.floor(limit / 2) + 1, Math.ceil((limit * 5) / 8)).map((count) => '\u2764\ufe0f'.repeat(count)),
    fc.tuple(unit, fc.integer({ min: -1, max: 1 })).map(([one, step]) => {
      const count = Math.floor(limit / codePointsOf(one));
      return `${'a'.repeat(Math.max(0, limit - count * codePointsOf(one) + step))}${one.repeat(count)}`;
    }),
    fc.array(fc.constantFrom(...TEXT_UNITS, 'a', 'é'), { minLength: Math.max(1, min), maxLength: 8 }).map((units) => units.join('')),
  );
}

/** Strings that JSON carries and the service must refuse or store: control characters, U+0000, lone surrogates, any code point. */
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.oneof(loneSurrogate, fc.constantFrom('\u0000', '\u0001', '\u007f', '\u2028', '\ufeff', '\uffff', 'a')), maxLength: 8 }),
  fc.constantFrom('', ' ', '\u0000', 'pm_card_ok\u0000', '\ud800', '\udc00x', '\ud83d\ude00', '%00', '../../etc/passwd', "'; DROP TABLE payments; --"),
  fc.integer({ min: 0, max: 70_000 }).map((length) => 'x'.repeat(length)),
  fc.array(fc.constantFrom(...TEXT_UNITS, '\ufe0f', '\u200d', '\u0301'), { maxLength: 8 }).map((units) => units.join('')),
);

/** JSON texts for one value, most of them ones the contract refuses. */
const hostileValueText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '1e309', '-1e309', '1E400', '123456789012345678901234567890', '9007199254740993', '-0', '0', '1.0', '0.5', '1e2',
    '99999999', '100000000', '-1', '1e-400', '"500"', '"USD"', 'null', 'true', 'false', '[]', '{}', '[500]', '{"$gt":0}',
    '"\\u0000"', '"\\ud800"', '"\\udfff\\ud800"', '"\\u0041\\u0000"', '"\\uDBFF\\uDFFF"',
  ),
  fc.double().map((value) => JSON.stringify(value)),
  fc.integer().map(String),
  hostileString.map((value) => JSON.stringify(value)),
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
  fc.integer({ min: 1, max: 5_000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`),
  fc.integer({ min: 1, max: 40 }).map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`),
);

/** Metadata past each of its limits, or with keys a naive object walk trips on. */
const hostileMetadataText: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 19, max: 40 }).map((n) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v'])))),
  fc.constantFrom(
    '{"__proto__":"x"}', '{"__proto__":{"polluted":"yes"}}', '{"constructor":"x"}', '{"constructor":{"prototype":{"x":"y"}}}',
    '{"toString":"x"}', '{"hasOwnProperty":"x"}', '{"":"v"}', `{"${'k'.repeat(41)}":"v"}`, `{"k":"${'v'.repeat(501)}"}`,
    '{"k":1}', '{"k":null}', '{"k":["v"]}', '{"k":{"k":"v"}}', '[]', '"meta"',
  ),
  fc.dictionary(hostileString, fc.oneof(hostileString, fc.jsonValue({ maxDepth: 2 })), { maxKeys: 5 }).map((value) =>
    JSON.stringify(value),
  ),
);

/** A key as the object's text spells it: plain, or with \u escapes that JSON.parse reads back to the same key. */
function spelled(key: string, escaped: boolean): string {
  if (!escaped || key.length === 0) return JSON.stringify(key);
  const code = key.charCodeAt(0).toString(16).padStart(4, '0');
  return `"\\u${code}${JSON.stringify(key).slice(2)}`;
}

type Pairs = [string, string][];

/** A body the contract accepts, as key/JSON-text pairs (so a mutation can break the text as well as the values). */
const validPairs: fc.Arbitrary<Pairs> = fc
  .record(
    {
      amount: fc.oneof(fc.integer({ min: 1, max: 99_999_999 }), fc.constantFrom(1, 500, 99_999_999)),
      currency: fc.constantFrom(...CURRENCIES),
      payment_method: fc.oneof(
        { arbitrary: fc.constantFrom(...CARDS), weight: 8 },
        { arbitrary: fc.string({ minLength: 1, maxLength: 60 }), weight: 2 },
        { arbitrary: nearLimit(255, 1), weight: 1 },
      ),
      order_id: fc.oneof({ arbitrary: fc.constantFrom(...ORDER_POOL), weight: 4 }, { arbitrary: nearLimit(64, 1), weight: 1 }),
      description: fc.oneof({ arbitrary: fc.string({ unit: 'grapheme', maxLength: 80 }), weight: 3 }, { arbitrary: nearLimit(500), weight: 1 }),
      metadata: fc.oneof(
        { arbitrary: fc.dictionary(fc.string({ minLength: 1, maxLength: 40 }), fc.string({ maxLength: 60 }), { maxKeys: 4 }), weight: 3 },
        { arbitrary: fc.dictionary(nearLimit(40, 1), nearLimit(500), { minKeys: 1, maxKeys: 2 }), weight: 1 },
      ),
    },
    { requiredKeys: ['amount', 'currency', 'payment_method'] },
  )
  .map((payment) => Object.entries(payment).map(([key, value]): [string, string] => [key, JSON.stringify(value)]));

/** A handful of fixed payments: sent again with pool keys they are replays, with another body key reuse. */
const TEMPLATES: Pairs[] = [
  [['amount', '500'], ['currency', '"USD"'], ['payment_method', '"pm_card_ok"']],
  [['amount', '1200'], ['currency', '"EUR"'], ['payment_method', '"pm_card_ok"'], ['order_id', '"ord-1"']],
  [['amount', '99'], ['currency', '"GBP"'], ['payment_method', '"pm_card_declined"']],
  [['amount', '7'], ['currency', '"JPY"'], ['payment_method', '"pm_card_ok"'], ['metadata', '{"cart":"42"}']],
  [['amount', '300'], ['currency', '"USD"'], ['payment_method', '"pm_card_pending"'], ['order_id', '"ord-2"']],
];

const FIELDS = ['amount', 'currency', 'payment_method', 'order_id', 'description', 'metadata'];

/**
 * A template whose one text field (order_id, description, payment_method, a
 * metadata key or value) is near its limit in code points: a body the
 * contract accepts or refuses on that field alone, with a 400 naming it.
 */
export const nearLimitPairs: fc.Arbitrary<Pairs> = fc
  .tuple(
    fc.constantFrom(...TEMPLATES),
    fc.oneof(
      nearLimit(64, 1).map((value): [string, unknown] => ['order_id', value]),
      nearLimit(500).map((value): [string, unknown] => ['description', value]),
      nearLimit(255, 1).map((value): [string, unknown] => ['payment_method', value]),
      nearLimit(40, 1).map((key): [string, unknown] => ['metadata', { [key]: 'v' }]),
      nearLimit(500).map((value): [string, unknown] => ['metadata', { cart: value }]),
    ),
  )
  .map(([template, [field, value]]) => [...template.filter(([key]) => key !== field), [field, JSON.stringify(value)]]);

type Mutation = (pairs: Pairs) => Pairs;

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.tuple(fc.constantFrom(...FIELDS), hostileValueText).map(([field, text]): Mutation => (pairs) => [
    ...pairs.filter(([key]) => key !== field),
    [field, text],
  ]),
  hostileMetadataText.map((text): Mutation => (pairs) => [...pairs.filter(([key]) => key !== 'metadata'), ['metadata', text]]),
  fc.constantFrom(...FIELDS).map((field): Mutation => (pairs) => pairs.filter(([key]) => key !== field)),
  // A key given twice, the second copy maybe spelled with escapes.
  fc.tuple(fc.nat(), fc.boolean(), hostileValueText).map(([index, escaped, text]): Mutation => (pairs) => {
    if (pairs.length === 0) return pairs;
    const [key] = pairs[index % pairs.length];
    return [...pairs, [spelled(key, escaped).slice(1, -1), text]];
  }),
  fc
    .tuple(
      fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'Amount', 'amount ', '', 'id', 'status', 'client_id'), hostileString),
      hostileValueText,
    )
    .map(([key, text]): Mutation => (pairs) => [...pairs, [JSON.stringify(key).slice(1, -1), text]]),
);

/** A body that is not a payment object at all. */
const otherBodyText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('', ' ', '[]', 'null', '"x"', '1', 'true', '{', '}', '{"amount":', '{"amount":500,}', "{'amount':500}",
    '{"amount":NaN}', '{"amount":Infinity}', '{"amount":0x10}', '{/*c*/"amount":1}', '{"a":1}{"b":2}', '\ufeff{}', '{}x',
    'amount=500&currency=USD&payment_method=pm_card_ok', '<xml/>'),
  fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value)),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.integer({ min: 1, max: 20_000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`),
  fc.integer({ min: 1, max: 20_000 }).map((depth) => '{"a":'.repeat(depth)),
  // Past the 64 KB body limit.
  fc.integer({ min: 65_537, max: 200_000 }).map(
    (size) => `{"amount":500,"currency":"USD","payment_method":"pm_card_ok","description":"${'d'.repeat(size)}"}`,
  ),
);

function joinPairs(pairs: Pairs, space: string): string {
  return `{${space}${pairs.map(([key, text]) => `"${key}":${space}${text}`).join(`,${space}`)}${space}}`;
}

const paymentText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...TEMPLATES).map((pairs) => joinPairs(pairs, '')), weight: 3 },
  { arbitrary: validPairs.map((pairs) => joinPairs(pairs, '')), weight: 3 },
  {
    arbitrary: fc
      .tuple(fc.oneof(validPairs, fc.constantFrom(...TEMPLATES)), fc.array(mutation, { minLength: 1, maxLength: 3 }), fc.constantFrom('', ' ', '\n\t'))
      .map(([pairs, mutations, space]) => joinPairs(mutations.reduce((body, mutate) => mutate(body), pairs), space)),
    weight: 6,
  },
  { arbitrary: otherBodyText, weight: 2 },
);

/** Bytes that are not UTF-8 (stray continuation bytes, an encoded surrogate, overlong forms), as latin1 text. */
const brokenUtf8 = fc
  .tuple(fc.constantFrom('\x80', '\xc0\xae', '\xed\xa0\x80', '\xff\xfe', '\xf4\x90\x80\x80'), fc.nat({ max: 40 }))
  .map(([bad, at]) => {
    const text = '{"amount":500,"currency":"USD","payment_method":"pm_card_ok","description":"abcdefghijklmnopqrstuvwxyz"}';
    const cut = Math.min(at + 68, text.length - 3);
    return `${text.slice(0, cut)}${bad}${text.slice(cut)}`;
  });

const paymentBody: fc.Arbitrary<TextBody> = fc.oneof(
  { arbitrary: paymentText.map((text): TextBody => ({ kind: 'text', text, encoding: 'utf8' })), weight: 20 },
  { arbitrary: brokenUtf8.map((text): TextBody => ({ kind: 'text', text, encoding: 'latin1' })), weight: 1 },
  { arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes): TextBody => ({ kind: 'text', text: Buffer.from(bytes).toString('latin1'), encoding: 'latin1' })), weight: 1 },
  { arbitrary: paymentText.map((text): TextBody => ({ kind: 'text', text, encoding: 'utf16le' })), weight: 1 },
);

const contentType: fc.Arbitrary<string[]> = fc.oneof(
  { arbitrary: fc.constant<string[]>(['application/json']), weight: 30 },
  {
    arbitrary: fc
      .constantFrom(
        'application/json; charset=utf-8', 'application/json; charset=UTF-8', 'APPLICATION/JSON', 'application/json;charset="utf-8"',
        'application/json; charset=utf-16', 'application/json; charset=latin1', 'application/json; charset=koi8-r',
        'application/json; charset=', 'application/json; boundary=x', 'application/merge-patch+json', 'application/problem+json',
        'text/plain', 'text/json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml',
        '*/*', '', 'application/json, text/plain', 'json', 'application/',
      )
      .map((value) => [value]),
    weight: 6,
  },
  { arbitrary: fc.constant<string[]>([]), weight: 2 },
  { arbitrary: fc.constant<string[]>(['application/json', 'text/plain']), weight: 1 },
);

const contentEncoding: fc.Arbitrary<[string, string][]> = fc.oneof(
  { arbitrary: fc.constant<[string, string][]>([]), weight: 30 },
  { arbitrary: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'compress', 'x-junk', 'gzip, gzip').map((value): [string, string][] => [['Content-Encoding', value]]), weight: 1 },
);

const poolKey = fc.constantFrom(...KEY_POOL);

/** Idempotency-Key headers: well-formed ones (fresh or shared between the clients), then every malformed form. */
const idempotencyKeyHeaders: fc.Arbitrary<string[]> = fc.oneof(
  { arbitrary: fc.uuid().map((key) => [key]), weight: 10 },
  { arbitrary: poolKey.map((key) => [key]), weight: 8 },
  { arbitrary: poolKey.map((key) => [`"${key}"`]), weight: 2 },
  {
    arbitrary: fc
      .oneof(
        fc.constantFrom('"abc', '"a"b"', '"a\\x"', '"\\"', '"', '""', '" "', '   ', '', '\t', 'a,b', '"a\\"b"', '"a\\\\b"'),
        fc.integer({ min: 256, max: 4_000 }).map((length) => 'k'.repeat(length)),
        fc.constant(`"${'k'.repeat(255)}"`),
        fc.constant('k'.repeat(255)),
        // Non-ASCII bytes: latin1 é, UTF-8 for é, a raw emoji's UTF-8.
        fc.constantFrom('caf\xe9', 'caf\xc3\xa9', '\xf0\x9f\x98\x80', 'key\x7f'),
        fc.string({ unit: 'binary-ascii', maxLength: 30 }),
      )
      .map((key) => [key]),
    weight: 5,
  },
  { arbitrary: fc.tuple(poolKey, fc.uuid()).map(([one, two]) => [one, two]), weight: 1 },
  { arbitrary: poolKey.map((key) => [key, key]), weight: 1 },
  { arbitrary: fc.constant<string[]>([]), weight: 2 },
);

const credential: fc.Arbitrary<Credential> = fc.constantFrom('own', 'own', 'peer', 'unknown');

const auth: fc.Arbitrary<Auth> = fc.oneof(
  { arbitrary: fc.constant<Auth>({ kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' }), weight: 30 },
  { arbitrary: fc.constant<Auth>({ kind: 'bearer', credential: 'peer', scheme: 'Bearer', gap: ' ', tail: '' }), weight: 3 },
  {
    arbitrary: fc
      .record({
        credential,
        scheme: fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic', 'Token', '', 'Bearer:'),
        gap: fc.constantFrom(' ', '  ', '\t', ''),
        tail: fc.constantFrom('', ' ', 'x', ' x', '\xe9', '%00'),
      })
      .map((form): Auth => ({ kind: 'bearer', ...form })),
    weight: 3,
  },
  {
    arbitrary: fc
      .oneof(
        fc.constantFrom('', 'Bearer', 'Bearer ', 'Bearer sk_', 'Basic dXNlcjpwYXNz', 'sk_live', 'Bearer \xff\xfe', 'Bearer null'),
        fc.string({ unit: 'binary-ascii', maxLength: 60 }).map((junk) => `Bearer sk_${junk}`),
        fc.integer({ min: 100, max: 8_000 }).map((length) => `Bearer sk_${'a'.repeat(length)}`),
      )
      .map((value): Auth => ({ kind: 'literal', value })),
    weight: 3,
  },
  { arbitrary: fc.tuple(credential, credential).map(([first, second]): Auth => ({ kind: 'twice', first, second })), weight: 1 },
  { arbitrary: fc.constant<Auth>({ kind: 'none' }), weight: 2 },
);

const idRef: fc.Arbitrary<IdRef> = fc.record({ of: fc.constantFrom<'own' | 'peer'>('own', 'peer'), index: fc.nat() });

/** Headers anyone may add: a client's own request id, a forged forwarding chain, junk. */
const extraHeaders: fc.Arbitrary<[string, string][]> = fc.oneof(
  { arbitrary: fc.constant<[string, string][]>([]), weight: 12 },
  {
    arbitrary: fc.array(
      fc.oneof(
        fc.tuple(fc.constant('X-Request-Id'), fc.oneof(fc.string({ maxLength: 300 }), fc.constantFrom('sk_live_secret', '\xe9\xe9', 'req_forged'))),
        fc.tuple(fc.constant('X-Forwarded-For'), fc.constantFrom('1.2.3.4', 'junk', '', '::1, 10.0.0.1', '999.999.999.999')),
        fc.tuple(fc.constantFrom('Accept', 'Accept-Encoding', 'Accept-Charset', 'Cookie', 'X-Api-Key', 'Origin', 'Range', 'If-None-Match'), fc.string({ maxLength: 60 })),
        fc.tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/), fc.string({ unit: 'binary-ascii', maxLength: 40 })),
      ),
      { maxLength: 3 },
    ),
    weight: 2,
  },
);

function base(family: FuzzRequest['family']): Omit<FuzzRequest, 'as' | 'method' | 'target' | 'auth' | 'headers'> {
  return { family, version: 'HTTP/1.1', framing: 'length', eol: '\r\n' };
}

const framing = fc.oneof(
  { arbitrary: fc.constant<'length'>('length'), weight: 12 },
  { arbitrary: fc.constant<'chunked'>('chunked'), weight: 1 },
);

/** POST /v1/payments with a payment that is valid, nearly valid, or anything but, and any headers. */
const anyCreateRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({ as: who, auth, keys: idempotencyKeyHeaders, types: contentType, encoding: contentEncoding, extra: extraHeaders, body: paymentBody, framing })
  .map(({ as, auth: credentials, keys, types, encoding, extra, body, framing: frame }): FuzzRequest => ({
    ...base('create'),
    as,
    method: 'POST',
    target: { kind: 'literal', target: '/v1/payments' },
    auth: credentials,
    headers: [
      ...keys.map((key): [string, string] => ['Idempotency-Key', key]),
      ...types.map((type): [string, string] => ['Content-Type', body.encoding === 'utf16le' && type === 'application/json' ? 'application/json; charset=utf-16' : type]),
      ...encoding,
      ...extra,
    ],
    body,
    framing: frame,
  }));

/** The Idempotency-Key of a limit probe starts so: properties.ts judges its answer by the field near its limit. */
export const LIMIT_PROBE_KEY_PREFIX = 'fuzz-limit-';

/**
 * A create whose only doubt is one text field near its limit (nearLimitPairs):
 * the client's own key, a fresh Idempotency-Key, JSON in UTF-8. Such a body
 * reaches validation and, when accepted, the database, where a length counted
 * otherwise than in code points would fail a check: a 500 the properties catch,
 * as they catch a 400 that does not name the field, or a value within its
 * limit refused (see limitProbeProblems).
 */
const nearLimitCreateRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({ as: who, key: fc.uuid(), pairs: nearLimitPairs })
  .map(({ as, key, pairs }): FuzzRequest => ({
    ...base('create'),
    as,
    method: 'POST',
    target: { kind: 'literal', target: '/v1/payments' },
    auth: { kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' },
    headers: [['Idempotency-Key', `${LIMIT_PROBE_KEY_PREFIX}${key}`], ['Content-Type', 'application/json']],
    body: { kind: 'text', text: joinPairs(pairs, ''), encoding: 'utf8' },
  }));

const createRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { arbitrary: anyCreateRequest, weight: 8 },
  { arbitrary: nearLimitCreateRequest, weight: 1 },
);

const limitValue = fc.oneof(
  fc.integer({ min: 1, max: 100 }).map(String),
  fc.constantFrom('0', '101', '007', '-1', '1e1', '0x10', '+5', ' 5', '5.0', '', 'abc', '%00', '%ff', '99999999999999999999999', '1,2', 'null', '[]'),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
);

const cursorValue = fc.oneof(
  fc.constantFrom('pay_', 'pay_%00', '%00', 'pay_01', `pay_${'Z'.repeat(26)}`, `pay_${'0'.repeat(26)}`, `PAY_${'0'.repeat(26)}`, 'pay_0000000000000000000000000u', '%'),
  fc.string({ unit: fc.constantFrom(...CROCKFORD), minLength: 26, maxLength: 26 }).map((ulid) => `pay_${ulid}`),
  fc.string({ maxLength: 60 }).map(encodeURIComponent),
  fc.integer({ min: 1_000, max: 10_000 }).map((length) => `pay_${'A'.repeat(length)}`),
);

const queryPart = fc.oneof(
  { arbitrary: limitValue.map((value) => `limit=${value}`), weight: 4 },
  { arbitrary: cursorValue.map((value) => `starting_after=${value}`), weight: 3 },
  {
    arbitrary: fc.constantFrom('limit', 'limit=', 'limit[]=1', 'limit[a]=1', 'starting_after[]=pay_', '=', '&', 'foo=bar', '__proto__=1',
      'constructor[prototype]=x', '%=%', 'limit=1&limit=2', 'starting_after=a&starting_after=b', 'LIMIT=5', 'limit%00=1'),
    weight: 2,
  },
);

const eventQueryPart = fc.oneof(
  { arbitrary: queryPart, weight: 3 },
  {
    arbitrary: fc.oneof(
      fc.constantFrom('payment.succeeded', 'payment.failed', 'payment.requires_review', 'payment.pending', 'payment.*', '', '%00'),
      fc.string({ maxLength: 30 }).map(encodeURIComponent),
    ).map((type) => `type=${type}`),
    weight: 1,
  },
);

/** A list with a query of any shape, and the sender's own payments and events by id. */
const readRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc.record({ as: who, auth, parts: fc.array(queryPart, { maxLength: 3 }), extra: extraHeaders }).map(({ as, auth: credentials, parts, extra }): FuzzRequest => ({
    ...base('read'),
    as,
    method: 'GET',
    target: { kind: 'literal', target: parts.length === 0 ? '/v1/payments' : `/v1/payments?${parts.join('&')}` },
    auth: credentials,
    headers: extra,
  })),
  fc.record({ as: who, auth, parts: fc.array(eventQueryPart, { maxLength: 3 }) }).map(({ as, auth: credentials, parts }): FuzzRequest => ({
    ...base('read'),
    as,
    method: 'GET',
    target: { kind: 'literal', target: parts.length === 0 ? '/v1/events' : `/v1/events?${parts.join('&')}` },
    auth: credentials,
    headers: [],
  })),
  fc.record({ as: who, index: fc.nat(), resource }).map(({ as, index, resource: kind }): FuzzRequest => ({
    ...base('read'),
    as,
    method: 'GET',
    target: { kind: 'one', resource: kind, ref: { of: 'own', index } },
    auth: { kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' },
    headers: [],
  })),
);

/** The other client's payments and events, asked for by id and used as a cursor, with the sender's own key. */
const probeRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({ as: who, ref: idRef.map((ref): IdRef => ({ ...ref, of: 'peer' })), resource, cursor: fc.boolean(), extra: fc.constantFrom('', '&limit=100', '&limit=1') })
  .map(({ as, ref, resource: kind, cursor, extra }): FuzzRequest => ({
    ...base('probe'),
    as,
    method: 'GET',
    target: cursor ? { kind: 'cursor', resource: kind, ref, extra } : { kind: 'one', resource: kind, ref },
    auth: { kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' },
    headers: [],
  }));

const pathSegment = fc.oneof(
  fc.string({ maxLength: 30 }).map(encodeURIComponent),
  fc.string({ unit: 'binary', maxLength: 20 }).map((text) => Buffer.from(text, 'utf8').toString('latin1')),
  fc.string({ unit: fc.constantFrom(...CROCKFORD), minLength: 26, maxLength: 26 }).map((ulid) => `pay_${ulid}`),
  fc.constantFrom('%00', '..', '../', '%2e%2e', '%2e%2e%2f', '..%2f..%2f', '%2F', '%', '%zz', '%E0%A4%A', '%ff', '%C0%AE', '%u0000', 'pay_',
    'pay_%00', 'pay_01HZZZZZZZZZZZZZZZZZZZZZZZ/..', ';', ';x=1', '?', '#frag', '//', '.', '%20', '+', '*', '\\', '%5c', '~'),
  fc.integer({ min: 200, max: 20_000 }).map((length) => 'a'.repeat(length)),
);

const pathTarget: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: pathSegment.map((segment) => `/v1/payments/${segment}`), weight: 6 },
  { arbitrary: fc.tuple(pathSegment, pathSegment).map(([one, two]) => `/v1/payments/${one}/${two}`), weight: 1 },
  { arbitrary: pathSegment.map((segment) => `/v1/events/${segment}`), weight: 2 },
  { arbitrary: pathSegment.map((segment) => `/v1/${segment}`), weight: 1 },
  { arbitrary: pathSegment.map((segment) => `/${segment}`), weight: 1 },
  {
    arbitrary: fc.constantFrom('/v1/payments/', '/v1/payments//', '/v1/payments/.', '/v1/payments%2F', '/V1/PAYMENTS', '/v1/Payments', '/v1', '/v1/',
      '/v2/payments', '/v1/events/', '/V1/EVENTS', '/v1/events//', '/health/../v1/payments', '/v1/./payments', '//v1/payments', '/v1/provider/events/', '/v1/provider', '/metrics', '/docs',
      '/docs-json', '/health/live', '/health/ready', '/health/live/x', '*', '', 'v1/payments', 'http://127.0.0.1/v1/payments', '/v1/payments#x',
      '/v1/payments?', '/%00', '/v1/payments/%00/', '/v1/provider/events?x=1'),
    weight: 3,
  },
);

const method = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'), weight: 8 },
  { arbitrary: fc.constantFrom('TRACE', 'CONNECT', 'PROPFIND', 'SEARCH', 'QUERY', 'PURGE', 'get', 'FOO', 'G ET', ''), weight: 1 },
);

/** Every path shape, including unknown ones, with any method. */
const pathRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({ as: who, auth, method, target: pathTarget, extra: extraHeaders, withBody: fc.boolean(), body: paymentBody, types: contentType })
  .map(({ as, auth: credentials, method: verb, target, extra, withBody, body, types }): FuzzRequest => ({
    ...base('path'),
    as,
    method: verb,
    target: { kind: 'literal', target },
    auth: credentials,
    headers: [
      ...(withBody ? types.map((type): [string, string] => ['Content-Type', type]) : []),
      ['Idempotency-Key', `fuzz-path-${target.length}`],
      ...extra,
    ],
    body: withBody ? body : undefined,
  }));

const eventBody: fc.Arbitrary<EventBody> = fc
  .record({
    ref: fc.option(idRef, { nil: null }),
    id: fc.oneof(fc.uuid().map((id) => `evt_${id}`), hostileString, fc.integer({ min: 250, max: 300 }).map((length) => 'e'.repeat(length))),
    status: fc.constantFrom('pending', 'succeeded', 'failed', 'refunded', ''),
    statusMatches: fc.boolean(),
    amount: fc.oneof(fc.constantFrom(500, 1200, 0, -1, 2 ** 53, 1.5), fc.integer({ min: 0, max: 99_999_999 })),
    currency: fc.oneof(fc.constantFrom(...CURRENCIES), fc.constantFrom('usd', 'XXXX', '')),
    version: fc.oneof(
      fc.integer({ min: 1, max: 1_000 }),
      fc.constantFrom(0, -1, 1.5, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 1e300),
      fc.integer({ min: 2 ** 31, max: Number.MAX_SAFE_INTEGER }),
    ),
    chargeId: fc.oneof(fc.uuid().map((id) => `ch_${id}`), hostileString),
    failureCode: fc.oneof(fc.constant(null), fc.constantFrom('card_declined', ''), hostileString),
    extra: fc.dictionary(fc.constantFrom('__proto__', 'reference', 'provider_key', 'x'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }),
  })
  .map(({ ref, id, status, statusMatches, amount, currency, version, chargeId, failureCode, extra }) => ({
    kind: 'event',
    ref,
    id,
    type: statusMatches ? `charge.${status}` : 'charge.succeeded',
    data: { id: chargeId, status, amount, currency, failure_code: failureCode, version, ...extra },
  }));

const signature: fc.Arbitrary<Signature | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 2 },
  {
    arbitrary: fc.record({
      secret: fc.constantFrom<'ours' | 'other'>('ours', 'ours', 'ours', 'other'),
      skewSeconds: fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, { arbitrary: fc.integer({ min: -3_600, max: 3_600 }), weight: 1 }),
      id: fc.constantFrom<'event' | 'other'>('event', 'event', 'event', 'other'),
    }),
    weight: 5,
  },
);

const junkSignatureHeaders: fc.Arbitrary<[string, string][]> = fc.array(
  fc.tuple(
    fc.constantFrom('webhook-id', 'webhook-timestamp', 'webhook-signature'),
    fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.constantFrom('v1,', 'v1,AAAA', 'v2,abc', 'v1,' + 'A'.repeat(44), '0', '-1', '99999999999', '1e3', 'NaN', `${Math.floor(Date.now() / 1000)}`),
    ),
  ),
  { maxLength: 4 },
);

/** POST /v1/provider/events: junk or forged signatures, and signed bodies of every shape. */
const eventRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({
    as: who,
    body: fc.oneof({ arbitrary: eventBody, weight: 3 }, { arbitrary: paymentBody, weight: 1 }),
    sign: signature,
    junk: junkSignatureHeaders,
    types: contentType,
    path: fc.constantFrom('/v1/provider/events', '/v1/provider/events', '/v1/provider/events/', '/v1/provider/events?x=1'),
    auth: fc.oneof({ arbitrary: fc.constant<Auth>({ kind: 'none' }), weight: 4 }, { arbitrary: auth, weight: 1 }),
  })
  .map(({ as, body, sign, junk, types, path, auth: credentials }): FuzzRequest => ({
    ...base('event'),
    as,
    method: 'POST',
    target: { kind: 'literal', target: path },
    auth: credentials,
    headers: [...types.map((type): [string, string] => ['Content-Type', type]), ...(sign ? [] : junk)],
    body,
    sign,
  }));

/** HTTP that Node's parser, or the layers right after it, must refuse in the envelope. */
const httpRequest: fc.Arbitrary<FuzzRequest> = fc
  .record({
    as: who,
    version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'http/1.1', 'HTTP/1', 'HTTP/1.1 x', ''),
    headers: fc.array(
      fc.oneof(
        fc.constantFrom<[string, string]>(
          ['Host', ''], ['Host', 'a b'], ['Host', 'x'], ['Content-Length', 'abc'], ['Content-Length', '-1'], ['Content-Length', '1, 2'],
          ['Transfer-Encoding', 'chunked'], ['Transfer-Encoding', 'gzip, chunked'], ['Transfer-Encoding', 'identity'], ['Transfer-Encoding', 'junk'],
          ['Expect', '100-continue'], ['Expect', 'junk'], ['Connection', 'upgrade'], ['Upgrade', 'websocket'], ['Upgrade', 'h2c'],
          ['Bad Header', 'x'], ['Bad\x00Header', 'x'], ['X-Ctl', 'a\x01b'], ['X-Nul', 'a\x00b'], ['X-Obs', 'a\r\n folded'], [' Leading', 'x'],
          ['X-Empty', ''], ['X-Colon', ':::'], ['X-Long', 'l'.repeat(17_000)],
        ),
        fc.tuple(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 12 }), fc.string({ unit: 'binary-ascii', maxLength: 20 })),
      ),
      { minLength: 1, maxLength: 3 },
    ),
    noHost: fc.boolean(),
    eol: fc.constantFrom<'\r\n' | '\n'>('\r\n', '\r\n', '\n'),
    target: fc.constantFrom('/v1/payments', '/health/live', '/v1/payments/pay_x'),
    verb: fc.constantFrom('GET', 'POST'),
  })
  .map(({ as, version, headers, noHost, eol, target, verb }): FuzzRequest => ({
    ...base('http'),
    as,
    method: verb,
    version,
    target: { kind: 'literal', target },
    auth: { kind: 'bearer', credential: 'own', scheme: 'Bearer', gap: ' ', tail: '' },
    headers: [...(noHost ? [['Host', OMIT_HOST] as [string, string]] : []), ...headers, ['Idempotency-Key', 'fuzz-http']],
    body: verb === 'POST' ? { kind: 'text', text: '{"amount":500,"currency":"USD","payment_method":"pm_card_ok"}', encoding: 'utf8' } : undefined,
    eol,
  }));

/** One request of any family, weighted towards creates: most of the state worth guarding is written there. */
export const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { arbitrary: createRequest, weight: 45 },
  { arbitrary: readRequest, weight: 12 },
  { arbitrary: probeRequest, weight: 8 },
  { arbitrary: pathRequest, weight: 15 },
  { arbitrary: eventRequest, weight: 10 },
  { arbitrary: httpRequest, weight: 10 },
);

/** A batch sent at once: requests of one batch race each other on keys, orders and payments. */
export function fuzzBatch(size: number): fc.Arbitrary<FuzzRequest[]> {
  return fc.array(fuzzRequest, { minLength: size, maxLength: size });
}
