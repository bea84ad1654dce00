import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpsServer, request, type Server } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { HaproxyEndpoint, MASTER_SOCKET_PATH_MAX, HaproxyMissingError } from '../../src/adapters/endpoint/haproxy-endpoint.ts';
import { pidsUsing } from '../../src/adapters/host/processes.ts';
import { isProcessAlive, statFields } from '../../src/adapters/host/process-status.ts';
import { issueMemberCertificates } from '../../src/adapters/pki/local-pki.ts';
import type { EndpointBackend } from '../../src/ports/machine-provider.ts';

// The control-plane endpoint on a real HAProxy, in front of small HTTPS servers that stand in for
// apiservers: /readyz answers 200 or 500 as the test says, /name the server's own name, /stream a
// tick every 100 ms for as long as the connection stays open.
const HOST = '127.32.0.1';
const PORT = 6443;
const ADDRESS = `${HOST}:${PORT}`;
const dir = mkdtempSync(join(tmpdir(), 'fastplane-endpoint-'));
const endpoint = new HaproxyEndpoint({ dir: join(dir, 'endpoint'), address: ADDRESS, stopGraceMs: 2000 });

interface Backend extends EndpointBackend {
  server: Server;
  ready: boolean;
  /** Requests for /name this backend answered. */
  hits: number;
}
const backends: Backend[] = [];

before(async () => {
  const tls = await issueMemberCertificates(join(dir, 'pki'), join(dir, 'member'), 'apiserver', '127.32.0.11');
  const credentials = { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) };
  for (const [index, machine] of ['m1', 'm2', 'm3'].entries()) {
    const host = `127.32.0.${String(11 + index)}`;
    const backend: Backend = { machine, address: `${host}:${String(PORT)}`, ready: true, hits: 0, server: createHttpsServer(credentials) };
    backend.server.on('request', (req, res) => {
      if (req.url === '/readyz') res.writeHead(backend.ready ? 200 : 500).end(backend.ready ? 'ok' : 'not ready');
      else if (req.url === '/name') {
        backend.hits++;
        res.end(machine);
      } else {
        res.writeHead(200);
        const timer = setInterval(() => res.write('tick\n'), 100);
        res.on('close', () => { clearInterval(timer); });
      }
    });
    await new Promise<void>((resolve) => backend.server.listen(PORT, host, resolve));
    backends.push(backend);
  }
});

after(async () => {
  // stop() ends HAProxy by its PID (master, then any worker left); the check below proves it.
  await endpoint.stop();
  for (const pid of pidsUsing(join(dir, 'endpoint'))) process.kill(pid, 'SIGKILL');
  for (const { server } of backends) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  rmSync(dir, { recursive: true, force: true });
});

/** GET through the endpoint on a connection of its own (round robin is per connection). */
function get(path: string, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const call = request({ host: HOST, port: PORT, path, agent: false, rejectUnauthorized: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => { resolve(body); });
      res.on('error', reject);
    });
    call.on('timeout', () => call.destroy(new Error(`no answer within ${String(timeoutMs)} ms`)));
    call.on('error', reject);
    call.end();
  });
}

async function names(count: number): Promise<string[]> {
  const answers: string[] = [];
  for (let i = 0; i < count; i++) answers.push(await get('/name'));
  return answers;
}

const pick = (...machines: string[]): Backend[] => backends.filter(({ machine }) => machines.includes(machine));

/** Milliseconds until `check` holds, polled every 20 ms; fails after timeoutMs. */
async function within(timeoutMs: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await check().catch(() => false))) {
    assert.ok(performance.now() - started < timeoutMs, `${what} within ${String(timeoutMs)} ms`);
    await sleep(20);
  }
  return Math.round(performance.now() - started);
}

const masterPid = async (): Promise<number> => Number((await readFile(join(dir, 'endpoint', 'haproxy.pid'), 'utf8')).split('\n')[0]);

test('without the HAProxy binary, route() says which binary is missing and how to install it', async () => {
  const missing = new HaproxyEndpoint({ dir: join(dir, 'missing'), address: '127.32.0.2:6443', binary: join(dir, 'no-such-haproxy') });
  await assert.rejects(missing.route(pick('m1')), (error: Error) => {
    assert.ok(error instanceof HaproxyMissingError);
    assert.match(error.message, /no-such-haproxy/);
    assert.match(error.message, /bash scripts\/install-test-tools\.sh/);
    assert.match(error.message, /apt-get install haproxy/);
    return true;
  });
  assert.equal(await missing.routes(), undefined);
});

test('routed to 3 apiservers: requests reach all 3 in turn and all 3 pass the /readyz check', async (t) => {
  assert.equal(await endpoint.routes(), undefined, 'not running before the first route()');
  const started = performance.now();
  await endpoint.route(backends);
  const routed = Math.round(performance.now() - started);
  const traffic = await within(5000, 'a request through the endpoint', async () => (await get('/name')) !== '');
  t.diagnostic(`route() took ${String(routed)} ms on a cold start; first answer ${String(traffic)} ms after it resolved`);
  const seen = await names(9);
  assert.deepEqual(new Set(seen), new Set(['m1', 'm2', 'm3']), `round robin reaches every apiserver: ${seen.join(' ')}`);
  await within(5000, 'all 3 up', async () => (await endpoint.routes())?.every(({ up }) => up) === true);
  assert.deepEqual(await endpoint.routes(), backends.map(({ machine }) => ({ machine, up: true })));
  await endpoint.route(backends); // idempotent: the same routes, the same process
  assert.equal((await endpoint.routes())?.length, 3);
});

test('an apiserver whose /readyz answers 500 is marked down within a few checks and gets no request', async (t) => {
  const [, m2] = backends;
  assert.ok(m2);
  // Past its first checks, m2 is as healthy as it gets: the time measured is the full `fall` count.
  await sleep(2500);
  m2.ready = false;
  const detected = await within(5000, 'm2 down', async () => (await endpoint.routes())?.find(({ machine }) => machine === 'm2')?.up === false);
  t.diagnostic(`m2 marked down ${String(detected)} ms after its /readyz turned 500`);
  const hits = m2.hits;
  const seen = await names(12);
  assert.deepEqual(new Set(seen), new Set(['m1', 'm3']));
  assert.equal(m2.hits, hits, 'no request reached the unready apiserver');
});

test('routed to 2: a stream open across the reload keeps flowing, the third never gets traffic again, and a down server stays down', async (t) => {
  const chunks: string[] = [];
  let cut: string | undefined;
  const stream = request({ host: HOST, port: PORT, path: '/stream', agent: false, rejectUnauthorized: false }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => chunks.push(chunk));
    res.on('close', () => (cut ??= 'closed'));
  });
  stream.on('error', (error) => (cut = error.message));
  stream.end();
  await within(3000, 'the stream flowing', () => Promise.resolve(chunks.length > 0));
  const master = await masterPid();

  const started = performance.now();
  await endpoint.route(pick('m1', 'm2'));
  t.diagnostic(`route() took ${String(Math.round(performance.now() - started))} ms with a reload`);
  assert.equal(await masterPid(), master, 'reloaded, not restarted');
  // m2 is still answering 500: the new worker starts from the state the old one saved.
  const [m1, m2, m3] = backends;
  assert.ok(m1 && m2 && m3);
  assert.deepEqual(await endpoint.routes(), [{ machine: 'm1', up: true }, { machine: 'm2', up: false }]);
  const [m2Hits, m3Hits] = [m2.hits, m3.hits];
  assert.deepEqual(new Set(await names(10)), new Set(['m1']));
  assert.equal(m2.hits, m2Hits, 'the down server got no request after the reload');

  m2.ready = true;
  await within(5000, 'm2 back up', async () => (await endpoint.routes())?.every(({ up }) => up) === true);
  assert.deepEqual(new Set(await names(10)), new Set(['m1', 'm2']));
  assert.equal(m3.hits, m3Hits, 'the apiserver routed away from gets no new request');

  const before = chunks.length;
  await sleep(1000);
  assert.equal(cut, undefined, 'the stream opened before the reload is not cut');
  assert.ok(chunks.length >= before + 5, `the stream still flows after the reload (${String(chunks.length - before)} ticks in 1 s)`);
  stream.destroy();
});

test('a bad bind address is refused, leaving the running configuration and process as they were', async () => {
  const configFile = join(dir, 'endpoint', 'haproxy.cfg');
  const config = readFileSync(configFile, 'utf8');
  const master = await masterPid();
  const routes = await endpoint.routes();
  const sameDir = (address: string): HaproxyEndpoint => new HaproxyEndpoint({ dir: join(dir, 'endpoint'), address });
  // Not an address: HAProxy's own check refuses it before anything is loaded.
  await assert.rejects(sameDir('127.32.0.300:6443').route(pick('m1')), /HAProxy refused the endpoint configuration for 127\.32\.0\.300:6443: .*ALERT/);
  // A valid address another process holds: the check passes, the reload fails, the old worker carries on.
  await assert.rejects(sameDir('127.32.0.11:6443').route(pick('m1')), /could not load the new configuration for 127\.32\.0\.11:6443 and keeps the previous one: .*cannot bind/);
  assert.equal(readFileSync(configFile, 'utf8'), config, 'the configuration in place is the running one');
  assert.equal(await masterPid(), master);
  assert.deepEqual(await endpoint.routes(), routes);
  assert.deepEqual(new Set(await names(6)), new Set(['m1', 'm2']));
  await endpoint.route(pick('m1', 'm2')); // the file still matches: nothing to do
});

test('two route() calls at once, from two endpoint objects, are serialized: both resolve and the last one written is served', async () => {
  const other = new HaproxyEndpoint({ dir: join(dir, 'endpoint'), address: ADDRESS });
  await Promise.all([endpoint.route(pick('m1')), other.route(pick('m1', 'm3'))]);
  const served = (await endpoint.routes())?.map(({ machine }) => machine);
  const inFile = readFileSync(join(dir, 'endpoint', 'haproxy.cfg'), 'utf8').split('\n').filter((line) => line.trim().startsWith('server ')).map((line) => line.trim().split(' ')[1]);
  assert.ok(JSON.stringify(served) === '["m1"]' || JSON.stringify(served) === '["m1","m3"]', `one of the two: ${JSON.stringify(served)}`);
  assert.deepEqual(served, inFile, 'the file in place is the one served');
});

test('after its master is killed, the next route() starts HAProxy afresh, with no worker of the old one left', async () => {
  const master = await masterPid();
  const workers = pidsUsing(join(dir, 'endpoint')).filter((pid) => pid !== master);
  process.kill(master, 'SIGKILL');
  await within(5000, 'the master gone', () => Promise.resolve(!isProcessAlive(master)));
  assert.equal(await endpoint.routes(), undefined, 'not running without its master');
  await endpoint.route(pick('m1', 'm2'));
  assert.notEqual(await masterPid(), master);
  // A stopped worker whose master is gone may linger as a zombie until its new parent reaps it.
  for (const pid of workers) assert.ok(!isProcessAlive(pid) || statFields(`/proc/${String(pid)}/stat`)?.[0] === 'Z', `old worker ${String(pid)} stopped (${statFields(`/proc/${String(pid)}/stat`)?.[0] ?? 'gone'})`);
  assert.deepEqual(new Set(await names(6)), new Set(['m1', 'm2']));
});

test('routed to none: the address stays bound and a connection is closed at once, not left hanging', async (t) => {
  await endpoint.route([]);
  assert.deepEqual(await endpoint.routes(), []);
  const started = performance.now();
  await assert.rejects(get('/name', 5000), (error: NodeJS.ErrnoException) => error.code === 'ECONNRESET' || /socket hang up|disconnected/.test(error.message));
  const closed = Math.round(performance.now() - started);
  t.diagnostic(`a client was turned away in ${String(closed)} ms`);
  assert.ok(closed < 1000, `closed within a second (${String(closed)} ms)`);
});

test('stop() ends HAProxy by its PID and frees the address; a second stop() is a no-op', async () => {
  const master = await masterPid();
  await endpoint.stop();
  assert.equal(isProcessAlive(master), false);
  assert.deepEqual(pidsUsing(join(dir, 'endpoint')), []);
  assert.equal(await endpoint.routes(), undefined);
  const probe = createTcpServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(PORT, HOST, resolve);
  });
  await new Promise((resolve) => probe.close(resolve));
  await endpoint.stop();
});

// The first folder's socket path fits sun_path but not HAProxy's `<path>.<pid>.tmp` (a bench's cluster
// folder failed so); the second fits neither.
for (const socketPathBytes of [100, 140]) {
  test(`a folder whose master.sock path has ${String(socketPathBytes)} bytes still serves: the master socket goes under /tmp, and stop() removes it`, async () => {
    const padding = socketPathBytes - Buffer.byteLength(join(dir, 'p', 'endpoint', 'master.sock')) + 1;
    const deep = join(dir, 'p'.repeat(padding), 'endpoint');
    assert.equal(Buffer.byteLength(join(deep, 'master.sock')), socketPathBytes);
    assert.ok(socketPathBytes > MASTER_SOCKET_PATH_MAX);
    const long = new HaproxyEndpoint({ dir: deep, address: `${HOST}:6444`, stopGraceMs: 2000 });
    const sockets = (): string[] => readdirSync('/tmp').filter((name) => name.startsWith('fastplane-haproxy-'));
    const before = sockets();
    try {
      await long.route(backends.slice(0, 1));
      assert.deepEqual(await long.routes(), [{ machine: 'm1', up: true }]);
      assert.equal(sockets().length, before.length + 1);
    } finally {
      await long.stop();
    }
    assert.deepEqual(pidsUsing(deep), []);
    assert.deepEqual(sockets(), before);
  });
}
