import dns, { type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';
import { DomainError, ErrorCode } from '../common/domain-error';

/**
 * Where the worker may send a merchant's webhooks. A webhook URL is chosen by
 * whoever registers the endpoint, and the worker POSTs to it from inside the
 * deployment: without these rules a URL could make the worker reach what only
 * the deployment can reach (a database, an admin port, the cloud metadata
 * service at 169.254.169.254). So an endpoint must be http(s), carry no
 * credentials, and name a host whose every address is ordinary public
 * unicast; everything else is refused, at registration and again at each
 * connection, because a name can resolve elsewhere by then.
 *
 * WEBHOOK_ALLOW_PRIVATE_URLS=true turns the address rules off (local demos
 * and tests, whose endpoints are on loopback); the scheme and credential rules stay.
 */

/** The longest URL an endpoint may have. */
export const WEBHOOK_URL_MAX_LENGTH = 2048;

export interface WebhookUrlPolicy {
  /** WEBHOOK_ALLOW_PRIVATE_URLS: any address, loopback and private ones included. */
  allowPrivate: boolean;
}

/** Every address a host name resolves to, as a connection would find them (the system resolver). */
export type ResolveAll = (hostname: string) => Promise<LookupAddress[]>;

const systemResolveAll: ResolveAll = (hostname) =>
  new Promise((resolve, reject) =>
    dns.lookup(hostname, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
  );

/** How ipaddr.js's special ranges are named in a refusal; any other range but unicast is "special-purpose". */
const RANGE_NAMES: Record<string, string> = {
  loopback: 'loopback',
  private: 'private',
  uniqueLocal: 'private',
  linkLocal: 'link-local',
  unspecified: 'unspecified',
  multicast: 'multicast',
  broadcast: 'broadcast',
  carrierGradeNat: 'shared (carrier-grade NAT)',
  ipv4Compatible: 'IPv4-compatible (deprecated)',
};

/** ::a.b.c.d, the deprecated IPv4-compatible form (:: and ::1 are ranges of their own). */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
/** The NAT64 well-known prefix: 64:ff9b::a.b.c.d reaches IPv4 a.b.c.d through a translator. */
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * The range an address is in, an IPv6 address carrying an IPv4 one judged
 * by the IPv4 address it reaches: ::ffff:127.0.0.1 is loopback.
 */
function rangeOf(address: ipaddr.IPv4 | ipaddr.IPv6): string {
  if (address.kind() === 'ipv4') return address.range();
  const v6 = address as ipaddr.IPv6;
  const range = v6.range();
  // The IPv4 address in the last 32 bits.
  const embedded = () => new ipaddr.IPv4([v6.parts[6] >> 8, v6.parts[6] & 0xff, v6.parts[7] >> 8, v6.parts[7] & 0xff]);
  if (range === 'ipv4Mapped' || (range === 'rfc6052' && v6.match(NAT64_WELL_KNOWN))) return embedded().range();
  if (range === 'unicast' && v6.match(IPV4_COMPATIBLE)) {
    const reached = embedded().range();
    return reached === 'unicast' ? 'ipv4Compatible' : reached;
  }
  return range;
}

/**
 * What kind of refused address `address` (an IP address, written or
 * resolved) is: `private`, `loopback`, …; undefined for ordinary public
 * unicast. Every special-purpose range is refused, not only the private
 * ones: carrier-grade NAT (100.64/10) and the benchmarking (198.18/15),
 * documentation and reserved ranges are no merchant's address either, and
 * some are a provider's internal network.
 */
function refusedAddressKind(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'not an IP address';
  }
  const range = rangeOf(parsed);
  if (range === 'unicast') return undefined;
  return RANGE_NAMES[range] ?? `special-purpose (${range})`;
}

/** Why the worker must not connect to `address`, for a delivery's last_error: `address 10.0.0.5 is private: refused`. */
export function addressRefusal(address: string): string | undefined {
  const kind = refusedAddressKind(address);
  return kind && `address ${address} is ${kind}: refused`;
}

/** An IPv6 literal's address without the URL's brackets. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
}

function parsedUrl(candidate: string): URL | undefined {
  if (candidate.length > WEBHOOK_URL_MAX_LENGTH) return undefined;
  try {
    return new URL(candidate);
  } catch {
    return undefined;
  }
}

/** What is wrong with the URL whatever its address: its scheme, or credentials in it. */
function shapeProblem(url: URL): 'scheme' | 'credentials' | undefined {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'scheme';
  if (url.username !== '' || url.password !== '') return 'credentials';
  return undefined;
}

/**
 * Why `candidate` cannot be a webhook endpoint's URL, as the message of a
 * 400 parameter_invalid on `url`; undefined when it can. The host is
 * resolved, and refused when any of its addresses is (the worker may
 * connect to any of them), or when it does not resolve at all.
 */
export async function webhookUrlRefusal(
  candidate: string,
  policy: WebhookUrlPolicy,
  resolveAll: ResolveAll = systemResolveAll,
): Promise<string | undefined> {
  const url = parsedUrl(candidate);
  if (!url || shapeProblem(url) === 'scheme') {
    return `url must be an absolute http or https URL of at most ${WEBHOOK_URL_MAX_LENGTH} characters.`;
  }
  if (shapeProblem(url) === 'credentials') {
    return 'url must not carry a user name or password: the webhook signature is what authenticates each request.';
  }
  if (policy.allowPrivate) return undefined;
  const host = bareHost(url.hostname);
  if (isIP(host)) {
    const kind = refusedAddressKind(host);
    return kind && `url names ${host}, which is ${kind}: webhooks go to public addresses only.`;
  }
  let addresses: LookupAddress[];
  try {
    addresses = await resolveAll(host);
  } catch (error) {
    return `url's host ${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'no address'}).`;
  }
  for (const { address } of addresses) {
    const kind = refusedAddressKind(address);
    if (kind) return `url's host ${host} resolves to ${address}, which is ${kind}: webhooks go to public addresses only.`;
  }
  return undefined;
}

/** The URL as it is stored (normalised), or the 400 parameter_invalid on `url` that says why it is refused. */
export async function checkedWebhookUrl(candidate: string, policy: WebhookUrlPolicy, resolveAll?: ResolveAll): Promise<string> {
  const refusal = await webhookUrlRefusal(candidate, policy, resolveAll);
  if (refusal !== undefined) throw new DomainError(ErrorCode.ParameterInvalid, refusal, { param: 'url' });
  return new URL(candidate).href;
}

/**
 * Why a delivery to a stored URL must not even be attempted, for its
 * last_error (a URL stored before these rules, or with other settings);
 * undefined: send it through webhookAgent, which checks a host name's
 * addresses when it connects. An IP address in the URL is checked here: Node
 * connects to one without a lookup.
 */
export function deliveryRefusal(stored: string, policy: WebhookUrlPolicy): string | undefined {
  const url = parsedUrl(stored);
  if (!url || shapeProblem(url) === 'scheme') return 'URL is not an http or https URL: refused';
  if (shapeProblem(url) === 'credentials') return 'URL carries credentials: refused';
  if (policy.allowPrivate) return undefined;
  const host = bareHost(url.hostname);
  return isIP(host) ? addressRefusal(host) : undefined;
}

/** Thrown to the connection, so the send fails with the refusal as its cause. */
class AddressRefused extends Error {
  readonly code = 'EADDRESSREFUSED';
}

/**
 * The connections of the webhook sends. Each resolves its host name itself,
 * refuses every address addressRefusal refuses (any one refused refuses the
 * name) and connects to the addresses it checked: nothing can change them
 * between the check and the connect, as a second lookup could (DNS
 * rebinding). With WEBHOOK_ALLOW_PRIVATE_URLS it resolves the same way and
 * refuses nothing. Redirects are the caller's: fetch with redirect 'manual'.
 */
export function webhookAgent(policy: WebhookUrlPolicy): Agent {
  const lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '');
      const refusal = policy.allowPrivate
        ? undefined
        : addresses.map(({ address }) => addressRefusal(address)).find((found) => found !== undefined);
      if (refusal !== undefined) return callback(new AddressRefused(refusal), '');
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
  return new Agent({ connect: { lookup } });
}
