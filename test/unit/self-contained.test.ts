import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';

/**
 * The repository stands on its own: a clone has every file its docs, code and comments point to.
 * Scans every tracked text file for links and relative paths that leave the repository or name
 * nothing in it, and for names of documents that only ever lived outside it.
 */

const ROOT = resolve(import.meta.dirname, '..', '..');
const BINARY = /\.(png|jpe?g|gif|ico|woff2?|db|sqlite)$/i;

function trackedTextFiles(): string[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  return files.filter((file) => !BINARY.test(file) && file !== 'package-lock.json' && existsSync(join(ROOT, file)));
}

function inside(path: string): boolean {
  const rel = relative(ROOT, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..');
}

// Assembled from parts, so this file does not match itself.
const OUTSIDE_NAMES = [new RegExp(['DESIGN', '\\.md'].join('')), new RegExp(['etcd-lab', '\\.md'].join('')), new RegExp(['/work', '/'].join('')), new RegExp(['\\.\\./', 'shared/'].join(''))];

/** Problems of one file: names of outside documents, relative paths out of the repo, dead Markdown links. */
function problemsIn(file: string, text: string): string[] {
  const problems: string[] = [];
  const lines = text.split('\n');
  lines.forEach((line, index) => {
    const where = `${file}:${String(index + 1)}`;
    for (const pattern of OUTSIDE_NAMES) if (pattern.test(line)) problems.push(`${where}: names a file outside the repository (${pattern.source})`);
    for (const match of line.matchAll(/(?:^|[\s'"`(=])((?:\.\.\/)+[\w.@-][\w./@-]*)/g)) {
      const target = resolve(ROOT, dirname(file), match[1]!);
      if (!inside(target)) problems.push(`${where}: ${match[1]!} leaves the repository`);
    }
    if (file.endsWith('.md')) {
      for (const match of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = match[1]!.split('#')[0]!;
        if (link === '' || /^[a-z][a-z+.-]*:/i.test(link)) continue;
        const target = resolve(ROOT, dirname(file), link);
        if (!inside(target)) problems.push(`${where}: link ${link} leaves the repository`);
        else if (!existsSync(target)) problems.push(`${where}: link ${link} names no file in the repository`);
      }
    }
  });
  return problems;
}

test('no tracked file links to or names a file outside the repository', () => {
  const problems = trackedTextFiles().flatMap((file) => problemsIn(file, readFileSync(join(ROOT, file), 'utf8')));
  assert.deepEqual(problems, []);
});

test('the check finds what it is for', () => {
  // Built from parts, so the scan of this file finds none of them.
  const up = '..' + '/';
  const sample = [`See [the design](${up}shared/x.md).`, `Read ${['DESIGN', '.md'].join('')}.`, 'See [gone](missing.md) and [ok](design.md#init).', `import a from '${up.repeat(3)}elsewhere/a.ts';`];
  const found = problemsIn('docs/x.md', sample.join('\n'));
  assert.equal(found.filter((p) => p.startsWith('docs/x.md:1')).length, 2, found.join('\n'));
  assert.ok(found.some((p) => p.startsWith('docs/x.md:2: names a file outside')), found.join('\n'));
  assert.ok(found.some((p) => p === 'docs/x.md:3: link missing.md names no file in the repository'), found.join('\n'));
  assert.ok(!found.some((p) => p.includes('design.md#init')), 'a link to a file that exists passes');
  assert.ok(found.some((p) => p.startsWith('docs/x.md:4: ') && p.endsWith('elsewhere/a.ts leaves the repository')), found.join('\n'));
});
