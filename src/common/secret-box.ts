import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/** The format's version, the key's id, then base64url of IV (12 bytes), tag (16) and ciphertext. */
const PREFIX = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const SEALED = /^v1\.([0-9a-f]{8})\.([A-Za-z0-9_-]+)$/;

/**
 * Secrets kept in the database (webhook endpoints' signing secrets), sealed
 * with AES-256-GCM under SECRETS_KEY: a dump of the database alone reveals
 * none of them, and a changed byte fails to open instead of signing with a
 * wrong secret. Each sealed value names the key that sealed it (the first 4
 * bytes of a hash of the key, which says nothing of the key), so during a
 * change of key the previous one still opens what it sealed while
 * `secrets:reencrypt` seals everything again under the new one.
 */
export class SecretBox {
  /** A new key, as SECRETS_KEY takes it: 32 random bytes (AES-256) in base64. */
  static newKey(): string {
    return randomBytes(32).toString('base64');
  }

  private readonly current?: { id: string; key: Buffer };
  private readonly keys = new Map<string, Buffer>();

  /**
   * Keys in base64: `key` seals and opens; `previousKey` (a key being
   * retired) only opens. Without `key` (production without a SECRETS_KEY of
   * its own), nothing is sealed or opened.
   */
  constructor({ key, previousKey }: { key?: string; previousKey?: string }) {
    if (key === undefined) return;
    const current = keyOf(key);
    this.current = { id: keyIdOf(current), key: current };
    this.keys.set(this.current.id, current);
    if (previousKey !== undefined) this.keys.set(keyIdOf(keyOf(previousKey)), keyOf(previousKey));
  }

  seal(plaintext: string): string {
    const current = this.required();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', current.key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const packed = Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url');
    return `${PREFIX}.${current.id}.${packed}`;
  }

  open(sealed: string): string {
    this.required();
    const match = SEALED.exec(sealed);
    if (!match) throw new Error('not a sealed secret');
    const key = this.keys.get(match[1]);
    if (!key) throw new Error(`sealed under key ${match[1]}, which is neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS`);
    const packed = Buffer.from(match[2], 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', key, packed.subarray(0, IV_BYTES));
    decipher.setAuthTag(packed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(packed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }

  /** Whether `sealed` is sealed under the current key already: what re-encryption skips. */
  isCurrent(sealed: string): boolean {
    return SEALED.exec(sealed)?.[1] === this.required().id;
  }

  private required(): { id: string; key: Buffer } {
    if (!this.current) throw new Error('SECRETS_KEY is not set: in production the development key is refused');
    return this.current;
  }
}

function keyOf(base64: string): Buffer {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== 32) throw new Error('a secrets key is 32 bytes');
  return key;
}

function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('secret-box key id\n').update(key).digest('hex').slice(0, 8);
}
