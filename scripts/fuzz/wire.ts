import { createHash } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { type Credential, type EventBody, type FuzzRequest, type IdRef, OMIT_HOST, type Resource, type Who } from './arbitraries';
import { loadConfig } from '../../src/config/app-config';
import { eventIdTime, retentionCutoff } from '../../src/ledger/outbox';

/**
 * Turns a generated request into the bytes sent, once the run knows the
 * clients' keys and the payments made so far, and says what the contract
 * promises for it beyond the properties every answer must have.
 */

export interface RunState {
  baseUrl: string;
  apiKeys: Record<Who, string>;
  webhookSecret: string;
  /** Each client's payment and event ids, in the order the run learnt them. */
  ids: Record<Resource, Record<Who, string[]>>;
}

/** A secret of the right shape that our API does not hold: events signed with it are forgeries. */
const FORGED_SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
/** Of the issued shape but never issued: it costs the API a lookup, and must fail it. */
const UNISSUED_KEY = `sk_${'U'.repeat(43)}`;
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** The API under fuzzing keeps events for the default retention. */
const EVENTS_RETENTION_DAYS = loadConfig({}).retention.eventsDays;

export interface Expectation {
  status: number;
  code?: string;
  /** For a 200 of GET /v1/payments/:id: the payment it must be. */
  id?: string;
  why: string;
}

export interface ResolvedRequest {
  bytes: string;
  /** The clients whose key the Authorization headers carry: an answer may show only their payments. */
  credentials: Set<Who>;
  expect?: Expectation;
}

export function other(who: Who): Who {
  return who === 'A' ? 'B' : 'A';
}

/** UTF-8 bytes as latin1 text when the text has characters past one byte; as it is otherwise. */
function bytesOf(text: string): string {
  return [...text].some((char) => char.charCodeAt(0) > 0xff) ? Buffer.from(text, 'utf8').toString('latin1') : text;
}

const ID_PREFIX: Record<Resource, string> = { payments: 'pay_', events: 'evt_' };

/** A well-formed id that nothing has: derived from the draw, not the clock, so a seed sends the same one. */
function unusedId(resource: Resource, index: number): string {
  const digest = createHash('sha256').update(`unused ${index}`).digest();
  return `${ID_PREFIX[resource]}${Array.from(digest.subarray(0, 26), (byte) => CROCKFORD[byte % 32]).join('')}`;
}

function idOf(state: RunState, resource: Resource, sender: Who, ref: IdRef): { id: string; exists: boolean } {
  const owner = ref.of === 'own' ? sender : other(sender);
  const ids = state.ids[resource][owner];
  return ids.length === 0 ? { id: unusedId(resource, ref.index), exists: false } : { id: ids[ref.index % ids.length], exists: true };
}

function keyOf(state: RunState, sender: Who, credential: Credential): string {
  if (credential === 'unknown') return UNISSUED_KEY;
  return state.apiKeys[credential === 'own' ? sender : other(sender)];
}

function eventText(state: RunState, request: FuzzRequest, body: EventBody): { text: string; eventId: string } {
  const payment = body.ref ? idOf(state, 'payments', request.as, body.ref).id : unusedId('payments', body.id.length);
  const data = { provider_key: `pk_${payment}`, reference: payment, ...body.data };
  const text = JSON.stringify({ id: body.id, type: body.type, created_at: new Date().toISOString(), data });
  return { text: bytesOf(text), eventId: body.id };
}

export function resolve(state: RunState, request: FuzzRequest): ResolvedRequest {
  const sender = request.as;
  let target: string;
  let expect: Expectation | undefined;
  if (request.target.kind === 'literal') {
    target = request.target.target;
  } else if (request.target.kind === 'one') {
    const { resource } = request.target;
    const { id, exists } = idOf(state, resource, sender, request.target.ref);
    target = `/v1/${resource}/${id}`;
    expect =
      request.target.ref.of === 'peer' || !exists
        ? { status: 404, code: 'resource_missing', why: `${exists ? "another client's" : 'no'} ${resource} id, asked for` }
        : { status: 200, id, why: `the sender's own ${resource} id` };
  } else {
    const { resource } = request.target;
    const { id, exists } = idOf(state, resource, sender, request.target.ref);
    target = `/v1/${resource}?starting_after=${id}${request.target.extra}`;
    if (!exists && resource === 'events' && eventIdTime(id) < retentionCutoff(EVENTS_RETENTION_DAYS)) {
      expect = { status: 200, why: 'an unknown event id made before the retention as a cursor: the end of the list' };
    } else {
      expect =
        request.target.ref.of === 'peer' || !exists
          ? { status: 400, code: 'parameter_invalid', why: `${exists ? "another client's" : 'no'} ${resource} id as a cursor` }
          : undefined;
    }
  }

  const credentials = new Set<Who>();
  const authorizations: string[] = [];
  const auth = request.auth;
  const credential = (which: Credential) => {
    if (which !== 'unknown') credentials.add(which === 'own' ? sender : other(sender));
    return keyOf(state, sender, which);
  };
  if (auth.kind === 'bearer') authorizations.push(`${auth.scheme}${auth.gap}${credential(auth.credential)}${auth.tail}`);
  else if (auth.kind === 'literal') authorizations.push(auth.value);
  else if (auth.kind === 'twice') authorizations.push(`Bearer ${credential(auth.first)}`, `Bearer ${credential(auth.second)}`);

  let body: string | undefined;
  const lines: [string, string][] = [];
  if (request.body) {
    const { text, eventId } =
      request.body.kind === 'event' ? eventText(state, request, request.body) : { text: Buffer.from(request.body.text, request.body.encoding).toString('latin1') };
    body = text;
    if (request.sign) {
      const at = new Date(Date.now() + request.sign.skewSeconds * 1_000);
      const id = request.sign.id === 'event' && eventId !== undefined ? eventId : `msg_${text.length}`;
      const secret = request.sign.secret === 'ours' ? state.webhookSecret : FORGED_SECRET;
      lines.push(
        ['webhook-id', bytesOf(id)],
        ['webhook-timestamp', String(Math.floor(at.getTime() / 1_000))],
        ['webhook-signature', new Webhook(secret).sign(id, at, Buffer.from(text, 'latin1').toString('utf8'))],
      );
    }
  }

  const host = new URL(state.baseUrl).host;
  const omitHost = request.headers.some(([name, value]) => name === 'Host' && value === OMIT_HOST);
  const head = [
    ...(omitHost ? [] : [['Host', host] as [string, string]]),
    ['Connection', 'close'] as [string, string],
    ...authorizations.map((value): [string, string] => ['Authorization', value]),
    ...request.headers.filter(([name, value]) => !(name === 'Host' && value === OMIT_HOST)).map(([name, value]): [string, string] => [name, bytesOf(value)]),
    ...lines,
  ];
  const eol = request.eol;
  let framed = '';
  if (body !== undefined) {
    if (request.framing === 'chunked') {
      head.push(['Transfer-Encoding', 'chunked']);
      const half = Math.ceil(body.length / 2);
      framed = [body.slice(0, half), body.slice(half)]
        .filter((chunk) => chunk.length > 0)
        .map((chunk) => `${chunk.length.toString(16)}\r\n${chunk}\r\n`)
        .join('');
      framed += '0\r\n\r\n';
    } else {
      head.push(['Content-Length', String(body.length)]);
      framed = body;
    }
  }
  const requestLine = `${request.method} ${bytesOf(target)} ${request.version}`;
  const bytes = `${requestLine}${eol}${head.map(([name, value]) => `${name}: ${value}${eol}`).join('')}${eol}${framed}`;
  return { bytes, credentials, expect };
}

/** The request as printable text, the run's API keys named rather than shown, cut to `max` characters. */
export function describeBytes(bytes: string, apiKeys: Record<Who, string>, max = 2_000): string {
  const named = bytes.replaceAll(apiKeys.A, '<api key of A>').replaceAll(apiKeys.B, '<api key of B>');
  const cut = named.length > max ? `${named.slice(0, max)}… (${named.length} bytes in all)` : named;
  return JSON.stringify(cut);
}
