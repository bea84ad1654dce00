import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrds } from '../src/api/crd.ts';
import { renderRbac } from '../src/api/rbac.ts';

// Writes the ControlPlane CRD generated from the zod schema into deploy/crds/, and the controller's
// RBAC into deploy/rbac/; with --check, only says whether the files are current (exit 1 when one is
// not), as the tests run it. --file PATH names another file for the CRD (the tests' stale copy).

const argv = process.argv.slice(2);
const fileFlag = argv.indexOf('--file');
const crdFile = fileFlag >= 0 ? (argv[fileFlag + 1] ?? '') : fileURLToPath(new URL('../deploy/crds/controlplanes.fastplane.dev.yaml', import.meta.url));
const files: [string, string][] = [[crdFile, renderCrds()]];
if (fileFlag < 0) files.push([fileURLToPath(new URL('../deploy/rbac/controller.yaml', import.meta.url)), renderRbac()]);

let stale = false;
for (const [file, wanted] of files) {
  if (argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      // A missing file is stale too.
    }
    if (current !== wanted) {
      process.stderr.write(`${file} is stale: run npx tsx scripts/crds.ts and commit it\n`);
      stale = true;
    } else process.stdout.write(`${file} is current\n`);
  } else {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, wanted);
    process.stdout.write(`wrote ${file}\n`);
  }
}
if (stale) process.exit(1);
