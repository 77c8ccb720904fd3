import { randomUUID } from 'node:crypto';
import { type Answer, send } from './measure';

export interface Check {
  check: string;
  ok: boolean;
  /** The two answers, when they differ. */
  api?: Answer;
  floor?: Answer;
}

export interface Agreement {
  ok: boolean;
  checks: Check[];
  /** A key and a payment made through the API, for the replay and get loads of both sides. */
  replayKey: string;
  paymentId: string;
}

/**
 * The floor is a floor only if it answers what the API answers. Both share
 * one database, so each can replay what the other stored: a key created on
 * one side is replayed byte for byte on the other (same fingerprint, same
 * stored bytes), reads of one payment and of a page agree, and the errors a
 * client can cause (a key reused with another body, a body that fails
 * validation, a wrong key) come out the same.
 */
export async function checkAgreement(
  apiUrl: string,
  floorUrl: string,
  request: { headers: Record<string, string>; body: string },
): Promise<Agreement> {
  const checks: Check[] = [];
  const post = (url: string, key: string, body = request.body, headers = request.headers) =>
    send(url, { method: 'POST', path: '/v1/payments', headers: { ...headers, 'idempotency-key': key }, body });
  const get = (url: string, path: string) => send(url, { method: 'GET', path, headers: request.headers });
  const same = (check: string, api: Answer, floor: Answer, expected: { status: number; replayed?: boolean }) => {
    const ok =
      api.status === expected.status &&
      floor.status === expected.status &&
      api.body === floor.body &&
      (expected.replayed === undefined || (api.replayed === expected.replayed && floor.replayed === expected.replayed));
    checks.push(ok ? { check, ok } : { check, ok, api, floor });
  };

  const apiKey = randomUUID();
  const apiFirst = await post(apiUrl, apiKey);
  const floorReplayOfApi = await post(floorUrl, apiKey);
  same('the floor replays a key the API created, byte-equal', { ...apiFirst, replayed: true }, floorReplayOfApi, {
    status: 201,
    replayed: true,
  });

  const floorKey = randomUUID();
  const floorFirst = await post(floorUrl, floorKey);
  same('the API replays a key the floor created, byte-equal', await post(apiUrl, floorKey), { ...floorFirst, replayed: true }, {
    status: 201,
    replayed: true,
  });
  const apiReplay = await post(apiUrl, apiKey);
  const floorReplay = await post(floorUrl, floorKey);
  const ownReplays = [apiReplay, floorReplay].every((answer) => answer.status === 201 && answer.replayed);
  const ok = ownReplays && apiReplay.body === apiFirst.body && floorReplay.body === floorFirst.body;
  checks.push(ok ? { check: 'each side replays its own key, byte-equal', ok } : { check: 'each side replays its own key, byte-equal', ok, api: apiReplay, floor: floorReplay });

  const paymentId = (JSON.parse(apiFirst.body) as { id: string }).id;
  const apiGet = await get(apiUrl, `/v1/payments/${paymentId}`);
  same('GET of a payment, and equal to its created answer', apiGet, await get(floorUrl, `/v1/payments/${paymentId}`), {
    status: 200,
  });
  checks.push({ check: 'a read is the created answer', ok: apiGet.body === apiFirst.body });
  same('GET /v1/payments?limit=10', await get(apiUrl, '/v1/payments?limit=10'), await get(floorUrl, '/v1/payments?limit=10'), {
    status: 200,
  });

  const otherBody = JSON.stringify({ ...(JSON.parse(request.body) as object), amount: 501 });
  same('a key reused with another body', await post(apiUrl, apiKey, otherBody), await post(floorUrl, apiKey, otherBody), {
    status: 422,
  });
  const invalid = JSON.stringify({ ...(JSON.parse(request.body) as object), amount: '500', extra: 1 });
  same('a body that fails validation', await post(apiUrl, randomUUID(), invalid), await post(floorUrl, randomUUID(), invalid), {
    status: 400,
  });
  const declinedKey = randomUUID();
  const declined = JSON.stringify({ ...(JSON.parse(request.body) as object), payment_method: 'pm_card_declined' });
  const floorDecline = await post(floorUrl, declinedKey, declined);
  same('a decline made by the floor, replayed by the API', await post(apiUrl, declinedKey, declined), { ...floorDecline, replayed: true }, {
    status: 402,
    replayed: true,
  });
  const stranger = { ...request.headers, authorization: `Bearer sk_${'x'.repeat(43)}` };
  same('an unknown API key', await post(apiUrl, randomUUID(), request.body, stranger), await post(floorUrl, randomUUID(), request.body, stranger), {
    status: 401,
  });

  return { ok: checks.every((check) => check.ok), checks, replayKey: apiKey, paymentId };
}
