import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderCrds } from '../src/api/crd.ts';

// Writes the ControlPlane CRD generated from the zod schema into deploy/crds/; with --check, only says
// whether the checked-in file is current (exit 1 when it is not), as the tests run it.

const FILE = fileURLToPath(new URL('../deploy/crds/controlplanes.fastplane.dev.yaml', import.meta.url));

const wanted = renderCrds();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(FILE, 'utf8');
  } catch {
    // A missing file is stale too.
  }
  if (current !== wanted) {
    process.stderr.write(`${FILE} is stale: run npx tsx scripts/crds.ts and commit it\n`);
    process.exit(1);
  }
  process.stdout.write(`${FILE} is current\n`);
} else {
  writeFileSync(FILE, wanted);
  process.stdout.write(`wrote ${FILE}\n`);
}
