import { generateApiKey, isApiKeyShaped } from './api-key';

describe('API keys', () => {
  it('are generated in the shape authentication accepts', () => {
    for (let i = 0; i < 100; i++) expect(isApiKeyShaped(generateApiKey())).toBe(true);
  });

  it.each(['sk_', 'sk_short', `pk_${'a'.repeat(43)}`, `sk_${'a'.repeat(44)}`, `sk_${'a'.repeat(42)}=`, `sk_${'é'.repeat(43)}`])(
    'refuses %s without a lookup',
    (candidate) => {
      expect(isApiKeyShaped(candidate)).toBe(false);
    },
  );
});
