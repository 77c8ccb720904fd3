import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { type Browser, chromium } from 'playwright-core';
import { useProcessStack } from './support/process-stack';

jest.setTimeout(60_000);

/** Debian's Chromium, installed by scripts/install-test-prerequisites. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * What a newcomer does first: open /docs in a browser, authorize with an API
 * key and make a payment with "Try it out". Headless Chromium drives the real
 * Swagger UI the API serves, against the API as a process.
 */
describe('/docs in a browser', () => {
  const stack = useProcessStack({ client: 'docs in a browser' });
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-prerequisites`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      // This machine's network is closed: without these Chromium keeps trying Google's hosts.
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(() => browser?.close());

  it('lists the payments operations, and Try it out with a key and an Idempotency-Key makes a payment', async () => {
    const page = await browser.newPage();
    await page.goto(`${stack.api.url}/docs`);
    const create = page.locator('#operations-payments-PaymentsController_create');
    await create.waitFor();
    await page.locator('#operations-payments-PaymentsController_get').waitFor();
    await page.locator('#operations-events-EventsController_list').waitFor();

    await page.locator('.auth-wrapper .authorize').click();
    await page.locator('.modal-ux input[type=text], .modal-ux input:not([type])').first().fill(stack.apiKey);
    await page.locator('.modal-ux .auth-btn-wrapper .authorize').click();
    await page.locator('.modal-ux .btn-done').click();

    await create.locator('.opblock-summary').click();
    await create.locator('.try-out__btn').click();
    const key = randomUUID();
    await create.locator('tr[data-param-name="Idempotency-Key"] input').fill(key);
    await create.locator('textarea.body-param__text').fill(
      JSON.stringify({ amount: 990, currency: 'EUR', payment_method: 'pm_card_ok' }),
    );
    await create.locator('.execute').click();

    const status = create.locator('.live-responses-table .response .response-col_status').first();
    await status.waitFor();
    expect((await status.innerText()).trim()).toBe('201');
    const shown = JSON.parse(
      await create.locator('.live-responses-table .response-col_description pre').first().innerText(),
    ) as unknown;
    expect(shown).toMatchObject({ object: 'payment', amount: 990, status: 'succeeded' });
    const [{ n }] = await stack.db.query(
      `SELECT count(*)::int AS n FROM idempotency_keys WHERE key = $1 AND response_status = 201`,
      [key],
    );
    expect(n).toBe(1);
  });
});
