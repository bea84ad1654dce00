import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { linkSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { InvalidInputError } from '../api/errors.ts';

/**
 * The keys that seal a provider's documents in the record store, read from a key file each fastplane
 * host is given and the store never holds (the envelope of Kubernetes' `EncryptionConfiguration`): a
 * sealed value is `fastplane:enc:aesgcm:v1:<key name>:` then base64 of nonce, ciphertext and tag. The
 * file lists named keys, one `name:base64 of 32 bytes` a line; the first seals, every one opens, so a
 * new key is rolled out to every host before it is put first, and an old one removed only after
 * `fastplane secrets rotate` re-sealed everything with the first.
 */

/** The key file in the state dir when none is named: the state dir is this host's, never shared. */
export const DEFAULT_KEY_FILE = 'secrets.key';

const PREFIX = 'fastplane:enc:aesgcm:v1:';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const NAME = /^[A-Za-z0-9._-]{1,64}$/;

export interface NamedKey {
  name: string;
  key: Buffer;
}

export class SealingKeys {
  constructor(
    readonly keys: readonly NamedKey[],
    /** Where the keys come from, for messages: the key file. */
    readonly source: string,
  ) {}

  /** The key that seals: the file's first. */
  get current(): NamedKey {
    const [first] = this.keys;
    if (first === undefined) throw new InvalidInputError([`${this.source}: holds no key`]);
    return first;
  }

  /**
   * `value` sealed with the current key. `context` (the document's scope and key) is authenticated
   * too, so a sealed value copied onto another document does not open.
   */
  seal(context: string, value: string): string {
    const { name, key } = this.current;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce);
    cipher.setAAD(Buffer.from(`${PREFIX}${name}:${context}`));
    const body = Buffer.concat([nonce, cipher.update(value, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${PREFIX}${name}:${body.toString('base64')}`;
  }

  /** The plain value of a sealed one; a value without the prefix (stored before sealing) as it is. */
  open(context: string, value: string): string {
    const sealed = parseSealed(value);
    if (sealed === undefined) return value;
    const named = this.keys.find((k) => k.name === sealed.name);
    if (named === undefined) {
      throw new InvalidInputError([`${context}: sealed with key ${sealed.name}, which ${this.source} does not hold (give this host the key file the other hosts of this store use)`]);
    }
    const body = Buffer.from(sealed.body, 'base64');
    try {
      if (body.length < NONCE_BYTES + TAG_BYTES) throw new Error('too short');
      const decipher = createDecipheriv('aes-256-gcm', named.key, body.subarray(0, NONCE_BYTES));
      decipher.setAAD(Buffer.from(`${PREFIX}${named.name}:${context}`));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new InvalidInputError([`${context}: does not open with key ${named.name} of ${this.source}: the stored value was changed, or that key's bytes differ from the ones that sealed it`]);
    }
  }

  /** Whether `value` is already sealed with the current key (a rotation leaves it as it is). */
  isCurrent(value: string): boolean {
    return parseSealed(value)?.name === this.current.name;
  }
}

function parseSealed(value: string): { name: string; body: string } | undefined {
  if (!value.startsWith(PREFIX)) return undefined;
  const rest = value.slice(PREFIX.length);
  const colon = rest.indexOf(':');
  return colon < 0 ? undefined : { name: rest.slice(0, colon), body: rest.slice(colon + 1) };
}

/** The keys of a key file's text; every problem names the file and line. */
export function parseKeyFile(text: string, source: string): SealingKeys {
  const problems: string[] = [];
  const keys: NamedKey[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${source}:${String(index + 1)}`;
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon);
    const key = Buffer.from(colon < 0 ? '' : line.slice(colon + 1), 'base64');
    if (!NAME.test(name)) problems.push(`${where}: not name:key (a name of letters, digits, '.', '_' or '-', a colon, then 32 bytes in base64)`);
    else if (key.length !== KEY_BYTES) problems.push(`${where}: key ${name} is ${String(key.length)} bytes, not ${String(KEY_BYTES)} (openssl rand -base64 32 makes one)`);
    else if (keys.some((k) => k.name === name)) problems.push(`${where}: key ${name} is listed twice`);
    else keys.push({ name, key });
  });
  if (problems.length === 0 && keys.length === 0) problems.push(`${source}: holds no key`);
  if (problems.length > 0) throw new InvalidInputError(problems);
  return new SealingKeys(keys, source);
}

/**
 * Reads the key file at `path`. A file that is not there is an input error, unless `create`: then a
 * new one is written with one fresh key (this host's state dir, where nothing is for other users).
 * A file others may read is refused, as ssh refuses such a private key.
 */
export function loadKeyFile(path: string, create: boolean): SealingKeys {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new InvalidInputError([`${path}: cannot read the key file`]);
    if (!create) throw new InvalidInputError([`${path}: no such key file (docs/operations.md says how to give a host its key)`]);
    const line = `${newKeyName()}:${randomBytes(KEY_BYTES).toString('base64')}`;
    // Written whole, then linked: two commands starting at once keep one key, and none reads half a file.
    const tmp = `${path}.${String(process.pid)}.tmp`;
    writeFileSync(tmp, `# fastplane secrets key: the first line seals, every line opens\n${line}\n`, { mode: 0o600 });
    try {
      linkSync(tmp, path);
    } catch (raced) {
      if ((raced as NodeJS.ErrnoException).code !== 'EEXIST') throw raced;
    } finally {
      rmSync(tmp, { force: true });
    }
    return loadKeyFile(path, false);
  }
  if ((mode & 0o077) !== 0) throw new InvalidInputError([`${path}: the key file may be read by others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`]);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new InvalidInputError([`${path}: cannot read the key file`]);
  }
  return parseKeyFile(text, path);
}

/** A name no other host's generated key has: the date it was made and random hex. */
function newKeyName(): string {
  return `key-${new Date().toISOString().slice(0, 10)}-${randomBytes(4).toString('hex')}`;
}
