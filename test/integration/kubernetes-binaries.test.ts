import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { BEGIN_MARKER, requiredKubernetes, WRAPPERS_DIR, wrapperDirs } from '../../scripts/kubernetes-replaces.ts';

// The Kubernetes programs built by scripts/install-kubernetes.sh from the wrapper modules in
// tools/kubernetes/v1.N. Needs the minors the test set-up installs: the `install-kubernetes.sh`
// arguments of the README's test command, which .ci/run runs too.

const ROOT = join(import.meta.dirname, '..', '..');
const CACHE = process.env.FASTPLANE_KUBERNETES_CACHE ?? join(homedir(), '.cache', 'fastplane', 'kubernetes');
const COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
const PROGRAMS = [...COMPONENTS, 'kubectl'] as const;
const tempDirs: string[] = [];

after(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

const run = (command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): SpawnSyncReturns<string> =>
  spawnSync(command, args, { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });

/** The minors an `install-kubernetes.sh` command line installs, from a shell text (none when absent). */
const minorsInstalledBy = (shell: string): string[] => {
  const match = /bash scripts\/install-kubernetes\.sh((?:\s+\d+\.\d+)*)/.exec(shell);
  assert.ok(match, 'the set-up runs no bash scripts/install-kubernetes.sh');
  return (match[1] ?? '').trim().split(/\s+/).filter((minor) => minor !== '');
};

/** The README's test command: the set-up line that ends in `npm test`. */
const readmeTestCommand = (): string => {
  const line = readFileSync(join(ROOT, 'README.md'), 'utf8')
    .split('\n')
    .find((text) => text.startsWith('bash ') && text.trimEnd().endsWith('npm test'));
  assert.ok(line !== undefined, 'the README has no set-up command ending in npm test');
  return line;
};

const SETUP_MINORS = minorsInstalledBy(readmeTestCommand());

/** The k8s.io/kubernetes version a minor's wrapper module requires ("1.36" -> "v1.36.3"). */
const pinnedVersion = (minor: string): string => requiredKubernetes(readFileSync(join(WRAPPERS_DIR, `v${minor}`, 'go.mod'), 'utf8'));

const binDir = (version: string): string => join(CACHE, version, 'usr', 'bin');

const mtimes = (dir: string): number[] => PROGRAMS.map((program) => statSync(join(dir, program)).mtimeMs);

const assertInstalled = (minor: string, version: string): void => {
  const missing = PROGRAMS.filter((program) => !existsSync(join(binDir(version), program)));
  assert.deepEqual(missing, [], `Kubernetes ${version} is not installed in ${CACHE}: run bash scripts/install-kubernetes.sh ${minor}`);
};

test('CI runs the same install-kubernetes.sh set-up as the README, for minors that have wrappers', () => {
  assert.ok(SETUP_MINORS.length > 0, 'the README test command installs no Kubernetes minor');
  assert.deepEqual(minorsInstalledBy(readFileSync(join(ROOT, '.ci', 'run'), 'utf8')), SETUP_MINORS);
  const wrapped = wrapperDirs().map((dir) => dir.slice(dir.lastIndexOf('/v') + 2));
  for (const minor of SETUP_MINORS) assert.ok(wrapped.includes(minor), `no tools/kubernetes/v${minor} among ${wrapped.join(', ')}`);
});

for (const minor of SETUP_MINORS) {
  describe(`Kubernetes ${minor}`, () => {
    const version = pinnedVersion(minor);

    test(`the wrapper pins a ${minor} patch`, () => {
      assert.match(version, new RegExp(`^v${minor.replace('.', '\\.')}\\.\\d+$`));
    });

    test('each control-plane program reports the pinned version', () => {
      assertInstalled(minor, version);
      for (const component of COMPONENTS) {
        const result = run(join(binDir(version), component), ['--version']);
        assert.equal(result.status, 0, `${component} --version: ${result.stderr}`);
        assert.equal(result.stdout.trim(), `Kubernetes ${version}`, component);
      }
    });

    test("kubectl's client version is the pinned version", () => {
      assertInstalled(minor, version);
      const result = run(join(binDir(version), 'kubectl'), ['version', '--client', '-o', 'json']);
      assert.equal(result.status, 0, result.stderr);
      const parsed: unknown = JSON.parse(result.stdout);
      assert.ok(typeof parsed === 'object' && parsed !== null && 'clientVersion' in parsed);
      const client = parsed.clientVersion as Record<string, unknown>;
      const [major, minorNumber] = minor.split('.');
      assert.equal(client.gitVersion, version);
      assert.equal(client.major, major);
      assert.equal(client.minor, minorNumber);
    });

    test('installing again builds nothing: says so, and every binary keeps its mtime', () => {
      assertInstalled(minor, version);
      const before = mtimes(binDir(version));
      const started = Date.now();
      const result = run('bash', ['scripts/install-kubernetes.sh', minor]);
      const elapsed = Date.now() - started;
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stderr, new RegExp(`Kubernetes ${version} already installed`));
      assert.doesNotMatch(result.stderr, /building/);
      assert.deepEqual(mtimes(binDir(version)), before);
      // Running four programs' --version, no compiler: seconds even on a busy machine, never minutes.
      assert.ok(elapsed < 20_000, `took ${elapsed} ms`);
    });
  });
}

test("every wrapper's replace block is what the generator makes from its release's go.mod", () => {
  const result = run('npx', ['tsx', 'scripts/kubernetes-replaces.ts', '--check']);
  assert.equal(result.status, 0, result.stdout + result.stderr);
  for (const dir of wrapperDirs()) assert.match(result.stdout, new RegExp(`${dir.slice(ROOT.length + 1)}/go\\.mod: replaces match`));
});

test('the check fails, changing nothing, when a replace line differs from the release', () => {
  const copy = mkdtempSync(join(tmpdir(), 'fastplane-kube-wrapper-'));
  tempDirs.push(copy);
  const [first] = wrapperDirs();
  assert.ok(first !== undefined, 'no wrapper module under tools/kubernetes');
  cpSync(join(first, 'go.mod'), join(copy, 'go.mod'));
  const original = readFileSync(join(copy, 'go.mod'), 'utf8');
  assert.ok(original.includes(BEGIN_MARKER));
  const edited = original.replace(/(\tk8s\.io\/api => k8s\.io\/api v0\.\d+\.)(\d+)/, (_match, head: string, patch: string) => `${head}${Number(patch) + 1}`);
  assert.notEqual(edited, original, 'the wrapper has no k8s.io/api replace line');
  writeFileSync(join(copy, 'go.mod'), edited);
  const result = run('npx', ['tsx', 'scripts/kubernetes-replaces.ts', '--check', copy]);
  assert.equal(result.status, 1, result.stdout + result.stderr);
  assert.match(result.stderr, /replaces differ/);
  assert.equal(readFileSync(join(copy, 'go.mod'), 'utf8'), edited);
});

test('an unknown minor exits non-zero naming the wrappers there are, building nothing', () => {
  const result = run('bash', ['scripts/install-kubernetes.sh', '1.99']);
  assert.equal(result.status, 1);
  assert.match(result.stderr, /no wrapper module for Kubernetes 1\.99/);
  for (const dir of wrapperDirs()) assert.ok(result.stderr.includes(dir.slice(dir.lastIndexOf('/') + 1)), result.stderr);
});

test('a failed build exits 1 saying so and leaves nothing in the cache', () => {
  const cache = mkdtempSync(join(tmpdir(), 'fastplane-kube-cache-'));
  tempDirs.push(cache);
  const [minor] = SETUP_MINORS;
  assert.ok(minor !== undefined);
  // -mod=vendor: the wrapper has no vendor folder, so go build fails at once, before compiling anything.
  const result = run('bash', ['scripts/install-kubernetes.sh', minor], { ...process.env, FASTPLANE_KUBERNETES_CACHE: cache, GOFLAGS: '-mod=vendor' });
  assert.equal(result.status, 1, result.stderr);
  assert.match(result.stderr, new RegExp(`building Kubernetes ${pinnedVersion(minor)} failed`));
  assert.deepEqual(readdirSync(cache), []);
});

describe('spec.kubernetes.binaries: a directory of ones own', () => {
  test('one holding the four programs of the version is used; one missing a program or of another version is bad input naming it', async () => {
    const { kubernetesBinDir } = await import('../../src/adapters/kubernetes/kubernetes-binaries.ts');
    const { InvalidInputError } = await import('../../src/api/errors.ts');
    const built = join(CACHE, 'v1.36.3', 'usr', 'bin');
    const own = mkdtempSync(join(tmpdir(), 'fastplane-kube-bin-'));
    tempDirs.push(own);
    for (const program of PROGRAMS) cpSync(join(built, program), join(own, program));
    assert.equal(kubernetesBinDir('1.36.3', own), own);
    assert.throws(() => kubernetesBinDir('1.37.2', own), (error: unknown) => error instanceof InvalidInputError && /spec\.kubernetes\.binaries: .* does not hold Kubernetes 1\.37\.2 kube-apiserver, kube-controller-manager, kube-scheduler, kubectl/.test(error.message));
    rmSync(join(own, 'kube-scheduler'));
    assert.throws(() => kubernetesBinDir('1.36.3', own), (error: unknown) => error instanceof InvalidInputError && /does not hold Kubernetes 1\.36\.3 kube-scheduler \(each must report v1\.36\.3\)/.test(error.message));
  });
});
