import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseShowProc, parseShowStat, serverStatesToKeep } from '../../src/adapters/endpoint/haproxy-cli.ts';
import { BACKEND, renderHaproxyConfig } from '../../src/adapters/endpoint/haproxy-config.ts';

const backends = [
  { machine: 'cp-1', address: '127.32.0.11:6443' },
  { machine: 'cp-2', address: '127.32.0.12:6443' },
];
const render = (over: Partial<Parameters<typeof renderHaproxyConfig>[0]> = {}): string =>
  renderHaproxyConfig({ bind: '127.32.0.1:6443', backends, serverStateFile: '/state/server-state', ...over });
const lines = (config: string): string[] => config.split('\n').map((line) => line.trim());

test('the configuration passes TLS through in TCP mode and checks /readyz over TLS without verifying', () => {
  const config = lines(render());
  for (const line of ['mode tcp', 'bind 127.32.0.1:6443', `default_backend ${BACKEND}`, 'balance roundrobin', 'option httpchk GET /readyz', 'http-check expect status 200']) {
    assert.ok(config.includes(line), `has "${line}"`);
  }
  assert.ok(config.includes('default-server check check-ssl verify none inter 1000ms fall 2 rise 1'));
  // No TLS is terminated: no certificate on the bind line, no `ssl` on a server (only its check uses TLS).
  assert.ok(!config.some((line) => / ssl\b|crt /.test(line)));
  assert.ok(config.includes('server-state-file /state/server-state'));
  assert.ok(config.includes('load-server-state-from-file global'));
});

test('one server line per backend, named after its machine, in the order given', () => {
  const servers = lines(render()).filter((line) => line.startsWith('server '));
  assert.deepEqual(servers, ['server cp-1 127.32.0.11:6443', 'server cp-2 127.32.0.12:6443']);
});

test('with no backend the frontend still binds, to a backend with no server', () => {
  const config = lines(render({ backends: [] }));
  assert.ok(config.includes('bind 127.32.0.1:6443'));
  assert.ok(config.includes(`backend ${BACKEND}`));
  assert.deepEqual(config.filter((line) => line.startsWith('server ')), []);
});

test('names and addresses that would not be one word of the configuration are refused', () => {
  assert.throws(() => render({ backends: [{ machine: 'cp 1', address: '127.32.0.11:6443' }] }), /machine name "cp 1"/);
  assert.throws(() => render({ backends: [{ machine: 'cp-1', address: '127.32.0.11:6443\n    server x 1.2.3.4:1' }] }), /not host:port/);
  assert.throws(() => render({ backends: [backends[0]!, backends[0]!] }), /cp-1 is listed twice/);
  assert.throws(() => render({ bind: '127.32.0.1' }), /endpoint address "127.32.0.1" is not host:port/);
});

test('show proc gives the master reload count and failures', () => {
  const answer = '#<PID>          <type>          <reloads>       <uptime>        <version>\n19399           master          3 [failed: 1]   0d00h20m29s     2.6.12\n# workers\n4626            worker          1               0d00h00m11s     2.6.12\n';
  assert.deepEqual(parseShowProc(answer), { reloads: 3, failed: 1 });
  assert.equal(parseShowProc(''), undefined);
});

test('show stat gives each server of the backend and whether it is up (going down still counts as up)', () => {
  const answer = [
    '# pxname,svname,qcur,status,weight',
    'apiserver,FRONTEND,,OPEN,',
    'apiservers,cp-1,0,UP,1',
    'apiservers,cp-2,0,DOWN,1',
    'apiservers,cp-3,0,UP 1/2,1',
    'apiservers,cp-4,0,MAINT,1',
    'other,cp-5,0,UP,1',
    'apiservers,BACKEND,0,UP,3',
    '',
  ].join('\n');
  assert.deepEqual(parseShowStat(answer, 'apiservers'), [
    { machine: 'cp-1', up: true },
    { machine: 'cp-2', up: false },
    { machine: 'cp-3', up: true },
    { machine: 'cp-4', up: false },
  ]);
  assert.deepEqual(parseShowStat('', 'apiservers'), []);
});

test('saved server states are kept only for servers still at the same address', () => {
  const header = '1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord';
  const line = (name: string, ip: string, port: number): string => `2 apiservers 1 ${name} ${ip} 0 0 1 1 5 8 2 0 6 0 0 0 - ${String(port)} -`;
  const saved = [header, line('cp-1', '127.32.0.11', 6443), line('cp-2', '127.32.0.99', 6443), line('cp-9', '127.32.0.19', 6443), ''].join('\n');
  assert.equal(serverStatesToKeep(saved, backends), `${header}\n${line('cp-1', '127.32.0.11', 6443)}\n`);
});
