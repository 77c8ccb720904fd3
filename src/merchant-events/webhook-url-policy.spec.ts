import dns from 'node:dns';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DomainError, ErrorCode } from '../common/domain-error';
import { postSignedWebhook } from '../common/signed-webhook';
import { type ResolveAll, addressRefusal, checkedWebhookUrl, deliveryRefusal, webhookAgent, webhookUrlRefusal } from './webhook-url-policy';

const STRICT = { allowPrivate: false };
const RELAXED = { allowPrivate: true };
/** Public addresses, resolved only: no test connects to them. */
const PUBLIC_V4 = '93.184.215.14';
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';

/** A resolver that answers every name with `addresses`. */
function resolvingTo(...addresses: string[]): ResolveAll {
  return async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
}

describe('addressRefusal', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['100.64.0.1', 'shared (carrier-grade NAT)'],
    ['198.18.0.1', 'special-purpose (reserved)'],
    ['192.0.2.1', 'special-purpose (reserved)'],
    ['240.0.0.1', 'special-purpose (reserved)'],
    ['2001:db8::1', 'special-purpose (reserved)'],
    ['2002:7f00:1::', 'special-purpose (6to4)'],
    ['64:ff9b:1::a00:5', 'special-purpose (rfc6052)'],
    // IPv4-mapped, -compatible and NAT64 forms are judged by the IPv4 address they reach.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.5', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['::127.0.0.1', 'loopback'],
    ['::a00:5', 'private'],
    ['::5db8:d70e', 'IPv4-compatible (deprecated)'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
  ])('refuses %s as %s', (address, kind) => {
    expect(addressRefusal(address)).toBe(`address ${address} is ${kind}: refused`);
  });

  it.each([PUBLIC_V4, '8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', PUBLIC_V6, `::ffff:${PUBLIC_V4}`, `64:ff9b::${PUBLIC_V4}`])(
    'allows the public address %s',
    (address) => {
      expect(addressRefusal(address)).toBeUndefined();
    },
  );
});

describe('webhookUrlRefusal', () => {
  it.each([
    // Every spelling of 127.0.0.1 that the URL parser reads as an address.
    ['http://127.0.0.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://2130706433/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://0x7f000001/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://0x7f.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://017700000001/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://0177.0.0.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://127.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://127.0.0.1./hook', 'url names 127.0.0.1, which is loopback'],
    ['http://%31%32%37.0.0.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['http://１２７.0.0.1/hook', 'url names 127.0.0.1, which is loopback'],
    ['https://[::1]:8443/hook', 'url names ::1, which is loopback'],
    ['http://[::ffff:127.0.0.1]/hook', 'url names ::ffff:7f00:1, which is loopback'],
    ['http://[0:0:0:0:0:ffff:7f00:1]/hook', 'url names ::ffff:7f00:1, which is loopback'],
    ['http://[::127.0.0.1]/hook', 'url names ::7f00:1, which is loopback'],
    ['http://0/hook', 'url names 0.0.0.0, which is unspecified'],
    ['http://[::]/hook', 'url names ::, which is unspecified'],
    ['http://10.0.0.5/hook', 'url names 10.0.0.5, which is private'],
    ['http://10.0.0.0x5/hook', 'url names 10.0.0.5, which is private'],
    ['http://167772165/hook', 'url names 10.0.0.5, which is private'],
    ['http://172.16.8.8/hook', 'url names 172.16.8.8, which is private'],
    ['http://192.168.0.1/hook', 'url names 192.168.0.1, which is private'],
    ['http://[fd00::1]/hook', 'url names fd00::1, which is private'],
    ['http://169.254.169.254/latest/meta-data/', 'url names 169.254.169.254, which is link-local'],
    ['http://[fe80::1]/hook', 'url names fe80::1, which is link-local'],
    ['http://[::ffff:a9fe:a9fe]/hook', 'url names ::ffff:a9fe:a9fe, which is link-local'],
    ['http://224.0.0.1/hook', 'url names 224.0.0.1, which is multicast'],
    ['http://[ff02::1]/hook', 'url names ff02::1, which is multicast'],
    ['http://100.64.1.1/hook', 'url names 100.64.1.1, which is shared (carrier-grade NAT)'],
    ['http://198.19.0.1/hook', 'url names 198.19.0.1, which is special-purpose (reserved)'],
  ])('refuses %s: %s', async (url, reason) => {
    // The resolver would call any name public: an address in the URL is judged as written.
    await expect(webhookUrlRefusal(url, STRICT, resolvingTo(PUBLIC_V4))).resolves.toBe(
      `${reason}: webhooks go to public addresses only.`,
    );
  });

  it.each([
    ['localhost', ['127.0.0.1'], '127.0.0.1, which is loopback'],
    ['db.internal.example', ['10.1.2.3'], '10.1.2.3, which is private'],
    ['metadata.example', ['169.254.169.254'], '169.254.169.254, which is link-local'],
    ['v6.example', ['::1'], '::1, which is loopback'],
    ['mapped.example', ['::ffff:192.168.0.7'], '::ffff:192.168.0.7, which is private'],
    // One refused address refuses the name: the connection may take any of them.
    ['mixed.example', [PUBLIC_V4, '10.0.0.1'], '10.0.0.1, which is private'],
  ])('refuses a host, %s, that resolves to %j', async (host, addresses, reason) => {
    await expect(webhookUrlRefusal(`https://${host}/hook`, STRICT, resolvingTo(...addresses))).resolves.toBe(
      `url's host ${host} resolves to ${reason}: webhooks go to public addresses only.`,
    );
  });

  it('refuses a host that does not resolve, naming the resolver’s code', async () => {
    const notFound: ResolveAll = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }));

    await expect(webhookUrlRefusal('https://nowhere.example/hook', STRICT, notFound)).resolves.toBe(
      "url's host nowhere.example does not resolve (ENOTFOUND).",
    );
  });

  it.each(['https://merchant.example/hooks?x=1', `http://${PUBLIC_V4}:8080/hook`, `https://[${PUBLIC_V6}]/hook`])(
    'allows %s on public addresses',
    async (url) => {
      await expect(webhookUrlRefusal(url, STRICT, resolvingTo(PUBLIC_V4, PUBLIC_V6))).resolves.toBeUndefined();
    },
  );

  it.each([
    'http://user:password@merchant.example/hook',
    'https://user@merchant.example/hook',
    'https://:secret@merchant.example/hook',
    'https://u:p@ss@merchant.example/hook',
  ])('refuses credentials in %s, whatever the address rules', async (url) => {
    for (const policy of [STRICT, RELAXED]) {
      const refusal = await webhookUrlRefusal(url, policy, resolvingTo(PUBLIC_V4));
      expect(refusal).toBe('url must not carry a user name or password: the webhook signature is what authenticates each request.');
    }
  });

  it.each(['ftp://merchant.example/hook', 'file:///etc/passwd', 'javascript:alert(1)', 'merchant.example/hook', '', `https://merchant.example/${'a'.repeat(2048)}`])(
    'refuses %s: not an http(s) URL of at most 2048 characters',
    async (url) => {
      await expect(webhookUrlRefusal(url, RELAXED)).resolves.toBe('url must be an absolute http or https URL of at most 2048 characters.');
    },
  );

  it('allows loopback, private and unresolvable hosts with WEBHOOK_ALLOW_PRIVATE_URLS, resolving nothing', async () => {
    const resolveAll = jest.fn<ReturnType<ResolveAll>, Parameters<ResolveAll>>();

    for (const url of ['http://127.0.0.1:4000/hook', 'http://[::1]/hook', 'http://10.0.0.5/hook', 'http://localhost/hook', 'http://169.254.169.254/']) {
      await expect(webhookUrlRefusal(url, RELAXED, resolveAll)).resolves.toBeUndefined();
    }
    expect(resolveAll).not.toHaveBeenCalled();
  });

  it('checkedWebhookUrl answers the normalised URL, or a parameter_invalid on url', async () => {
    await expect(checkedWebhookUrl('HTTPS://Merchant.Example/hook', STRICT, resolvingTo(PUBLIC_V4))).resolves.toBe(
      'https://merchant.example/hook',
    );
    const refused = await checkedWebhookUrl('http://10.0.0.5/', STRICT).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ code: ErrorCode.ParameterInvalid, details: { param: 'url' } });
  });
});

describe('deliveryRefusal', () => {
  it('refuses credentials and refused address literals, without quoting the URL', () => {
    expect(deliveryRefusal('http://user:hunter2@merchant.example/hook', RELAXED)).toBe('URL carries credentials: refused');
    expect(deliveryRefusal('http://10.0.0.5/hook', STRICT)).toBe('address 10.0.0.5 is private: refused');
    expect(deliveryRefusal('http://[::ffff:7f00:1]:3000/', STRICT)).toBe('address ::ffff:7f00:1 is loopback: refused');
    expect(deliveryRefusal('gopher://merchant.example/', RELAXED)).toBe('URL is not an http or https URL: refused');
  });

  it('leaves host names to the connection, and loopback to WEBHOOK_ALLOW_PRIVATE_URLS', () => {
    expect(deliveryRefusal('https://merchant.example/hook', STRICT)).toBeUndefined();
    expect(deliveryRefusal('http://127.0.0.1:4000/hook', RELAXED)).toBeUndefined();
  });
});

describe('webhookAgent', () => {
  let server: Server;
  let port: number;
  let connections: number;

  beforeAll(async () => {
    server = createServer((_request, response) => response.writeHead(204).end());
    server.on('connection', () => connections++);
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    port = (server.address() as AddressInfo).port;
  });
  beforeEach(() => (connections = 0));
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => new Promise((closed) => server.close(closed)));

  /** The system resolver answering every name with `address`, as a rebound DNS record would. */
  function dnsAnswers(address: string) {
    return jest.spyOn(dns, 'lookup').mockImplementation(((_host: string, _options: unknown, callback: (...args: unknown[]) => void) =>
      callback(null, [{ address, family: 4 }])) as unknown as typeof dns.lookup);
  }

  const post = (url: string, policy = STRICT) =>
    postSignedWebhook(url, { headers: {}, body: '{}' }, { timeoutMs: 2_000, dispatcher: webhookAgent(policy) });

  it('refuses a name that resolves to loopback when it connects, and never reaches the listener', async () => {
    const lookup = dnsAnswers('127.0.0.1');

    await expect(post(`http://rebound.example:${port}/hook`)).resolves.toBe('address 127.0.0.1 is loopback: refused');
    expect(lookup).toHaveBeenCalledWith('rebound.example', expect.anything(), expect.any(Function));
    expect(connections).toBe(0);
  });

  it('connects to the very address it checked (the control: the same name, allowed)', async () => {
    dnsAnswers('127.0.0.1');

    await expect(post(`http://rebound.example:${port}/hook`, RELAXED)).resolves.toBeUndefined();
    expect(connections).toBe(1);
  });
});
