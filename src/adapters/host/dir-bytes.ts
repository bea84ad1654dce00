import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The bytes of every file under `dir` (0 when it is missing), as `du -sb` counts them: a learner's data
 * dir grows while its snapshot arrives, so this is how far it has come before it answers anything.
 * A file that goes between the listing and its stat (etcd renames its snapshot when whole) counts 0.
 */
export async function dirBytes(dir: string): Promise<number> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  const sizes = await Promise.all(
    entries.map(async (entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return dirBytes(path);
      return entry.isFile() ? stat(path).then((s) => s.size, () => 0) : 0;
    }),
  );
  return sizes.reduce((sum, size) => sum + size, 0);
}
