import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderCrds } from '../src/api/crd.ts';

// Writes the ControlPlane CRD generated from the zod schema into deploy/crds/; with --check, only says
// whether the file is current (exit 1 when it is not), as the tests run it. --file PATH names another
// file (the tests' stale copy).

const argv = process.argv.slice(2);
const fileFlag = argv.indexOf('--file');
const file = fileFlag >= 0 ? (argv[fileFlag + 1] ?? '') : fileURLToPath(new URL('../deploy/crds/controlplanes.fastplane.dev.yaml', import.meta.url));

const wanted = renderCrds();
if (argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    // A missing file is stale too.
  }
  if (current !== wanted) {
    process.stderr.write(`${file} is stale: run npx tsx scripts/crds.ts and commit it\n`);
    process.exit(1);
  }
  process.stdout.write(`${file} is current\n`);
} else {
  writeFileSync(file, wanted);
  process.stdout.write(`wrote ${file}\n`);
}
