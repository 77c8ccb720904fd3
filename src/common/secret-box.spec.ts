import { SecretBox } from './secret-box';

const key = () => SecretBox.newKey();

describe('SecretBox', () => {
  it('makes a new key of 32 bytes (AES-256) in base64, another each time', () => {
    const [one, other] = [SecretBox.newKey(), SecretBox.newKey()];

    expect(Buffer.from(one, 'base64')).toHaveLength(32);
    expect(Buffer.from(one, 'base64').toString('base64')).toBe(one);
    expect(other).not.toBe(one);
  });

  const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

  it('seals to a value that holds nothing of the secret, and opens it again', () => {
    const box = new SecretBox({ key: key() });

    const sealed = box.seal(SECRET);

    expect(sealed).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(SECRET.slice(6));
    expect(sealed).not.toContain(Buffer.from(SECRET).toString('base64url').slice(0, 16));
    expect(box.seal(SECRET)).not.toBe(sealed);
    expect(box.open(sealed)).toBe(SECRET);
  });

  it('refuses a sealed value changed by one character, or sealed under another key', () => {
    const box = new SecretBox({ key: key() });
    const sealed = box.seal(SECRET);
    const last = sealed.at(-2) === 'A' ? 'B' : 'A';

    expect(() => box.open(`${sealed.slice(0, -2)}${last}${sealed.at(-1)}`)).toThrow();
    expect(() => new SecretBox({ key: key() }).open(sealed)).toThrow(/neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS/);
    expect(() => box.open(SECRET)).toThrow(/not a sealed secret/);
  });

  it('opens with the previous key what it sealed, and seals only under the current one', () => {
    const [oldKey, newKey] = [key(), key()];
    const sealedBefore = new SecretBox({ key: oldKey }).seal(SECRET);
    const during = new SecretBox({ key: newKey, previousKey: oldKey });

    expect(during.open(sealedBefore)).toBe(SECRET);
    expect(during.isCurrent(sealedBefore)).toBe(false);
    const resealed = during.seal(during.open(sealedBefore));
    expect(during.isCurrent(resealed)).toBe(true);
    expect(new SecretBox({ key: newKey }).open(resealed)).toBe(SECRET);
  });

  it('without a key (production without SECRETS_KEY of its own) seals and opens nothing', () => {
    const sealed = new SecretBox({ key: key() }).seal(SECRET);
    const keyless = new SecretBox({});
    expect(() => keyless.seal(SECRET)).toThrow(/SECRETS_KEY is not set/);
    expect(() => keyless.open(sealed)).toThrow(/SECRETS_KEY is not set/);
  });
});
