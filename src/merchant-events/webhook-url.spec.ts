import { ErrorCode } from '../common/domain-error';
import { checkedWebhookUrl } from './webhook-url';

describe('checkedWebhookUrl', () => {
  it('takes an absolute http or https URL, as it will be called', async () => {
    await expect(checkedWebhookUrl('https://Shop.example/hooks?x=1')).resolves.toBe('https://shop.example/hooks?x=1');
    await expect(checkedWebhookUrl('http://127.0.0.1:9/hooks')).resolves.toBe('http://127.0.0.1:9/hooks');
  });

  it.each([
    'shop.example/hooks',
    'ftp://shop.example/hooks',
    'javascript:alert(1)',
    `https://shop.example/${'a'.repeat(2048)}`,
    'https://user:secret@shop.example/hooks',
    'https://user@shop.example/hooks',
  ])('refuses %s, naming the url parameter', async (url) => {
    await expect(checkedWebhookUrl(url)).rejects.toMatchObject({ code: ErrorCode.ParameterInvalid, details: { param: 'url' } });
  });
});
