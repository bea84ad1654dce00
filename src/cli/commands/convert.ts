import { stringify } from 'yaml';
import { InvalidInputError } from '../../api/errors.ts';
import { loadManifestForCli } from '../manifest-file.ts';

/**
 * `fastplane convert -f FILE`: the ControlPlane a manifest becomes (a KubeadmControlPlane converted),
 * on stdout, ready for `up -f`; the mapping and ignored fields on stderr.
 */
export function convertCommand(flags: { file?: string; output: string }): number {
  if (flags.file === undefined) throw new InvalidInputError(['-f: give the manifest to convert (-f FILE)']);
  if (flags.output !== 'yaml' && flags.output !== 'json') throw new InvalidInputError([`-o: must be yaml or json, got ${flags.output}`]);
  const { manifest } = loadManifestForCli(flags.file);
  process.stdout.write(flags.output === 'json' ? `${JSON.stringify(manifest, null, 2)}\n` : stringify(manifest));
  return 0;
}
