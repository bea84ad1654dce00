// `npm run chaos [-- -o json] [--soak 10m] [--only NAME] [--mode etcd|fastplane|both]`: runs the chaos
// scenarios on real etcd, each in both reconfiguration modes unless --mode picks one (etcd: etcd's own
// checks; fastplane: guarded, etcd's checks off), and prints one line per run (table) or
// `{ "scenarios": [...] }` (json, each with its mode). --soak repeats them until the time is up.
import { parseDuration } from '../../src/api/duration.ts';
import { NETWORK_SCENARIOS } from './network-scenarios.ts';
import { runScenario, type ReconfigurationMode, type ScenarioResult } from './scenario-run.ts';
import { OLDER_VERSION_SCENARIOS, SCENARIOS } from './scenarios.ts';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const format = option('-o') ?? 'table';
const soakMs = option('--soak') === undefined ? 0 : parseDuration(option('--soak') ?? '');
const only = option('--only');
const modeOption = option('--mode') ?? 'both';
const modes: ReconfigurationMode[] = modeOption === 'both' ? ['etcd', 'fastplane'] : modeOption === 'etcd' || modeOption === 'fastplane' ? [modeOption] : [];
if (soakMs === undefined || (format !== 'json' && format !== 'table') || modes.length === 0) {
  process.stderr.write('usage: npm run chaos -- [-o table|json] [--soak DURATION] [--only NAME] [--mode etcd|fastplane|both]\n');
  process.exit(2);
}
const chosen = [...SCENARIOS, ...OLDER_VERSION_SCENARIOS, ...NETWORK_SCENARIOS].filter((s) => only === undefined || s.name.includes(only));
const results: ScenarioResult[] = [];
const until = Date.now() + soakMs;
do {
  for (const mode of modes) {
    for (const scenario of chosen) {
      process.stderr.write(`running: ${scenario.name} (${mode})\n`);
      results.push(await runScenario(scenario, mode));
    }
  }
} while (Date.now() < until);

if (format === 'json') {
  const scenarios = results.map((r) => ({
    name: r.name,
    mode: r.mode,
    converged: r.converged,
    seconds: r.seconds,
    writesAcked: r.writesAcked,
    ackedButLost: r.ackedButLost,
    longestOutageMs: r.longestOutageMs,
    expectation: r.expectation,
    expectationMet: r.expectationMet,
  }));
  process.stdout.write(`${JSON.stringify({ scenarios }, null, 2)}\n`);
} else {
  for (const r of results) {
    process.stdout.write(
      `${r.name.padEnd(66)} ${r.mode.padEnd(9)} converged=${String(r.converged).padEnd(5)} ${r.seconds.toFixed(1).padStart(6)}s acked=${String(r.writesAcked).padStart(5)} lost=${String(r.ackedButLost)} outage=${String(r.longestOutageMs)}ms expectation=${r.expectationMet ? 'met' : 'NOT MET'}\n`,
    );
  }
}
process.exitCode = results.every((r) => r.ackedButLost === 0 && r.expectationMet) ? 0 : 1;
