/** FNV-1a over a canonical JSON form: a stable, pure fingerprint of the fields that need new machines. */
export function templateHash(fields: Record<string, string | number | boolean | undefined>): string {
  const canonical = JSON.stringify(Object.keys(fields).sort().map((k) => [k, fields[k] ?? null]));
  let hash = 0x811c9dc5;
  for (let i = 0; i < canonical.length; i++) {
    hash ^= canonical.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}
