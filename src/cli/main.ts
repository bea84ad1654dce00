import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { InvalidInputError } from '../api/errors.ts';
import type { benchCommand } from './commands/bench.ts';
import type { ControllerFlags } from './commands/controller.ts';
import type { InstallFlags } from './commands/crds.ts';
import type { MaintainFlags } from './commands/maintain.ts';
import type { RecoverFlags } from './commands/recover.ts';
import type { RestoreFlags } from './commands/restore.ts';
import type { rolloutCommand } from './commands/rollout.ts';
import type { scaleCommand } from './commands/scale.ts';
import type { SimulateFlags } from './commands/simulate.ts';
import type { statusCommand } from './commands/status.ts';
import type { upCommand } from './commands/up.ts';
import type { CliContext, ContextOptions, GlobalOptions } from './context.ts';
import { EXIT } from './exit-codes.ts';

// package.json sits two levels up from both src/cli/main.ts and dist/cli/main.js.
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const output = (): Option => new Option('-o, --output <format>', 'table, json or yaml').default('table');
const timeout = (): Option => new Option('--timeout <duration>', 'give up after this long (exit 4)').default('10m');

// Each command's module (commands/<verb>.ts) is imported when that command runs: importing them all
// (etcd3 with gRPC and protobufjs, better-sqlite3, listr2, x509) made every start, `--help` included,
// cost about a second.

/** Runs a command with an opened context; maps failures to the exit codes of the CLI contract. */
async function withContext(program: Command, run: (ctx: CliContext) => Promise<number>, options?: ContextOptions): Promise<void> {
  const globals = program.opts<GlobalOptions>();
  let ctx: CliContext | undefined;
  let code: number;
  try {
    const { CliContext, resolveStateDir } = await import('./context.ts');
    const { chooseKeyFile, chooseStore, storeOpener } = await import('./store-selection.ts');
    const stateDir = resolveStateDir(globals);
    const opener = await storeOpener(chooseStore(globals, stateDir), chooseKeyFile(globals, stateDir));
    ctx = new CliContext(stateDir, globals.logLevel, globals.logFormat, globals.leaseTtl, opener, options);
    code = await run(ctx);
  } catch (error) {
    if (error instanceof InvalidInputError) {
      process.stderr.write(`error: ${error.problems.join('\nerror: ')}\n`);
      code = EXIT.invalid;
    } else if (error instanceof Error && (error.name === 'EtcdStoreUnreachableError' || error.name === 'KubernetesStoreUnreachableError' || error.name === 'KubectlError' || error.name === 'ForbiddenError')) {
      // Not fastplane's fault, and nothing to debug in a stack: say what did not answer, or what kubectl said.
      process.stderr.write(`error: ${error.message}\n`);
      ctx?.log.error({ err: error }, 'state store unreachable');
      code = EXIT.internal;
    } else {
      process.stderr.write(`internal error: ${error instanceof Error ? error.message : String(error)}\n`);
      ctx?.log.error({ err: error }, 'internal error');
      code = EXIT.internal;
    }
  } finally {
    await ctx?.close();
  }
  process.exitCode = code;
  // Everything is closed and said. A socket still connecting to a host that does not answer (a
  // partitioned ssh host or etcd member) would hold the process until the kernel gives up its SYN
  // retries, about two minutes; this timer does not keep the process alive itself.
  setTimeout(() => process.exit(code), LINGER_MS).unref();
}

/** The global --kubeconfig, for the commands that work on a cluster (and not only with --store kubernetes). */
function kubeconfigOf(program: Command): { kubeconfig?: string } {
  const { kubeconfig } = program.opts<GlobalOptions>();
  return kubeconfig === undefined ? {} : { kubeconfig };
}

/** How long a finished command waits for its last handles to close by themselves before it exits. */
const LINGER_MS = 2_000;

export function buildProgram(): Command {
  const program = new Command('fastplane')
    .description('Brings up, scales, upgrades and repairs etcd control planes: machines in parallel, membership changes one at a time.')
    .option('--state-dir <dir>', 'where records, logs and machines live (default $FASTPLANE_HOME or ~/.fastplane)')
    .option('--lease-ttl <duration>', "how long a cluster's lease outlives its holder's last renewal; another process then takes over (default 10s; fastplane controller: 3s)")
    .option('--log-level <level>', 'log level: trace, debug, info, warn, error, fatal or silent', 'info')
    .option('--log-format <format>', 'also log to stderr, as json (one object per line) or pretty (one line per record); the state dir\'s fastplane.log always gets json')
    .option('--store <kind>', 'where records live: sqlite (a file in the state dir, the default), etcd or kubernetes (shared by every host using it; $FASTPLANE_STORE)')
    .option('--etcd-endpoints <urls>', 'with --store etcd: client URLs, comma-separated ($FASTPLANE_ETCD_ENDPOINTS); `fastplane endpoints NAME` prints them for a control plane')
    .option('--etcd-cacert <file>', 'with --store etcd: CA certificate to verify etcd with ($FASTPLANE_ETCD_CACERT)')
    .option('--etcd-cert <file>', 'with --store etcd: client certificate ($FASTPLANE_ETCD_CERT)')
    .option('--etcd-key <file>', 'with --store etcd: client key ($FASTPLANE_ETCD_KEY)')
    .option('--insecure-store', 'with --store etcd: accept http:// endpoints or no client certificate, so anyone on the way can read and change every record ($FASTPLANE_INSECURE_STORE=1)')
    .option('--kubeconfig <file>', 'the kubeconfig of a Kubernetes cluster: with --store kubernetes, where records live ($FASTPLANE_KUBECONFIG); the cluster install and controller work on')
    .option('--store-namespace <namespace>', 'with --store kubernetes: the namespace of the records (default fastplane-system, created when missing; $FASTPLANE_STORE_NAMESPACE)')
    .option('--secrets-key <file>', "the key file that seals the CA and member keys in the store; the same file on every host sharing a store ($FASTPLANE_SECRETS_KEY; default <state dir>/secrets.key, made when missing)")
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });

  program
    .command('up')
    .description('store a control plane spec and reconcile until it converges (or follow the process that does)')
    .option('-f, --file <file>', 'ControlPlane manifest (YAML or JSON)')
    .option('--name <name>', 'control plane name (without -f)')
    .option('--replicas <n>', 'number of members (odd, 1..9)')
    .option('--version <version>', 'etcd version, e.g. 3.4.23')
    .option('--etcd-binaries <dir>', 'a directory holding etcd, etcdctl and etcdutl of that version, used instead of the installed ones')
    .option('--kubernetes <version>', 'run the Kubernetes control plane (kube-apiserver, controller-manager, scheduler) of this version on every machine, e.g. 1.36.3; etcd then defaults to the version kubeadm pairs with it')
    .option('--kubernetes-binaries <dir>', 'a directory holding kube-apiserver, kube-controller-manager, kube-scheduler and kubectl of that version, used instead of the installed ones')
    .option('--strategy <strategy>', 'parallel (default) or serial (like Cluster API KCP)')
    .option('--provisioning-delay <duration>', 'simulated provisioning time per machine: 8s or a range 3s-8s')
    .option('--insecure', 'debugging only: plain http, no TLS certificates (anyone who can reach the addresses can use etcd); fixed at creation')
    .option('--reconfiguration-check <who>', "etcd (default: etcd's own checks and 5 s rule) or fastplane (the planner checks; members run --strict-reconfig-check=false)")
    .addOption(timeout())
    .addOption(output())
    .action(async (flags: Parameters<typeof upCommand>[1]) => withContext(program, async (ctx) => (await import('./commands/up.ts')).upCommand(ctx, flags)));

  program
    .command('scale <name>')
    .description('change the number of members')
    .requiredOption('--replicas <n>', 'number of members (odd, 1..9)')
    .addOption(timeout())
    .addOption(output())
    .action(async (name: string, flags: Parameters<typeof scaleCommand>[2]) => withContext(program, async (ctx) => (await import('./commands/scale.ts')).scaleCommand(ctx, name, flags)));

  program
    .command('rollout <name>')
    .description('roll every machine to another etcd or Kubernetes version, surge machines first')
    .option('--version <version>', 'target etcd version')
    .option('--etcd-binaries <dir>', 'a directory holding etcd, etcdctl and etcdutl of the target version, used instead of the installed ones')
    .option('--kubernetes-version <version>', 'target Kubernetes version (one minor up at most); controller-manager and scheduler of the new version start once no older apiserver runs')
    .option('--kubernetes-binaries <dir>', 'a directory holding the Kubernetes programs of the target version, used instead of the installed ones')
    .addOption(timeout())
    .addOption(output())
    .action(async (name: string, flags: Parameters<typeof rolloutCommand>[2]) => withContext(program, async (ctx) => (await import('./commands/rollout.ts')).rolloutCommand(ctx, name, flags)));

  program
    .command('status [name]')
    .description('show control planes as etcd reports them now')
    .option('--explain', 'print what the planner is waiting for and why')
    .addOption(output())
    .action(async (name: string | undefined, flags: Parameters<typeof statusCommand>[2]) => withContext(program, async (ctx) => (await import('./commands/status.ts')).statusCommand(ctx, name, flags)));

  program
    .command('endpoints <name>')
    .description("print a control plane's client URLs and fastplane's client certificate, as the flags that make it the record store (--store etcd ...)")
    .addOption(new Option('-o, --output <format>', 'flags (to paste after fastplane), env (export lines) or json').default('flags'))
    .action(async (name: string, flags: { output: string }) => withContext(program, async (ctx) => (await import('./commands/endpoints.ts')).endpointsCommand(ctx, name, flags)));

  program
    .command('down <name>')
    .description('stop every member of a control plane and delete its machines and records')
    .option('--wait <duration>', 'how long a running reconcile gets to stop when asked', '30s')
    .option('--force', 'after --wait, take the lease from a reconcile that did not stop (it is fenced out)')
    .action(async (name: string, flags: { force?: boolean; wait?: string }) => withContext(program, async (ctx) => (await import('./commands/down.ts')).downCommand(ctx, name, flags)));

  program
    .command('kubeconfig <name>')
    .description("print an admin kubeconfig for a Kubernetes control plane's endpoint (kubectl --kubeconfig FILE)")
    .option('--machine <machine>', "for this machine's own kube-apiserver instead of the endpoint")
    .action(async (name: string, flags: { machine?: string }) => withContext(program, async (ctx) => (await import('./commands/kubeconfig.ts')).kubeconfigCommand(ctx, name, flags)));

  program
    .command('backup <name>')
    .description('take a snapshot of a control plane from a healthy member, verify it and store it in <state dir>/backups/<name>/')
    .addOption(new Option('-o, --output <format>', 'table or json (the backup\'s sidecar with its file)').default('table'))
    .action(async (name: string, flags: { output: string }) => withContext(program, async (ctx) => (await import('./commands/backup.ts')).backupCommand(ctx, name, flags)));

  program
    .command('backups <name>')
    .description('list the backups of a control plane, oldest first')
    .addOption(new Option('-o, --output <format>', 'table or json').default('table'))
    .action(async (name: string, flags: { output: string }) => withContext(program, async (ctx) => (await import('./commands/backups.ts')).backupsCommand(ctx, name, flags)));

  program
    .command('restore <name>')
    .description('build a control plane from a snapshot: the first machine restores it, the others join as learners')
    .option('--from <file>', 'snapshot file (checked against the sha256 of its sidecar when there is one)')
    .option('--replicas <n>', 'number of members (odd, 1..9)')
    .option('--version <version>', 'etcd version (default: the snapshot\'s, from its sidecar)')
    .option('--replace', 'replace an existing control plane of that name, after taking a backup of it')
    .addOption(timeout())
    .addOption(output())
    .action(async (name: string, flags: RestoreFlags) => withContext(program, async (ctx) => (await import('./commands/restore.ts')).restoreCommand(ctx, name, flags)));

  program
    .command('certs <name-or-renew> [name]')
    .description('certs NAME: every certificate of a control plane with its expiry; certs renew NAME: new member and client certificates, members restarted one at a time')
    .addOption(new Option('-o, --output <format>', 'table or json').default('table'))
    .option('--ca', 'with renew: also rotate every CA (etcd; on a Kubernetes control plane also the Kubernetes and front-proxy CAs): trust both, re-issue from the new CA, drop the old, members and components restarted one machine at a time')
    .action(async (first: string, second: string | undefined, flags: { output: string; ca?: boolean }) => withContext(program, async (ctx) => (await import('./commands/certs.ts')).certsCommand(ctx, first, second, flags)));

  program
    .command('secrets <action>')
    .description("secrets rotate: seal every control plane's documents in the store again with the key file's first key, so the other keys can leave the file")
    .addOption(new Option('-o, --output <format>', 'table or json').default('table'))
    .action(async (action: string, flags: { output: string }) => withContext(program, async (ctx) => (await import('./commands/secrets.ts')).secretsCommand(ctx, action, flags)));

  program
    .command('recover <name>')
    .description('when a majority of members is gone for good: restart the most up-to-date survivor with --force-new-cluster, delete the lost machines, scale back to replicas')
    .option('--yes', 'carry out the plan (without it, only print the survivors and the plan, and exit 3)')
    .option('--accept-unreachable', 'choose among the members read although the host of a voter does not answer (it may hold newer data)')
    .addOption(timeout())
    .action(async (name: string, flags: RecoverFlags) => withContext(program, async (ctx) => (await import('./commands/recover.ts')).recoverCommand(ctx, name, flags)));

  program
    .command('maintain <name>')
    .description('compact history to a retained window, defragment fragmented members one at a time (leader last), recover from a NOSPACE alarm')
    .option('--retain <revisions>', 'revisions of history to keep', '1000')
    .option('--threshold <share>', 'defragment members whose backend is at least this share free pages', '0.3')
    .addOption(new Option('-o, --output <format>', 'table or json').default('table'))
    .action(async (name: string, flags: MaintainFlags) => withContext(program, async (ctx) => (await import('./commands/maintain.ts')).maintainCommand(ctx, name, flags)));

  program
    .command('events <name>')
    .description('every recorded event of a control plane: actions, their results and times')
    .option('--watch', 'keep printing new events until interrupted')
    .addOption(new Option('-o, --output <format>', 'table or json (with --watch: one JSON object per line)').default('table'))
    .action(async (name: string, flags: { watch?: boolean; output: string }) => withContext(program, async (ctx) => (await import('./commands/events.ts')).eventsCommand(ctx, name, flags)));

  program
    .command('bench')
    .description('bring the same control plane up with serial (KCP), parallel, guarded and parallel learners on real etcd and compare')
    .option('--replicas <n>', 'number of members (odd, 3..9)', '5')
    .option('--provisioning-delay <duration>', 'simulated provisioning time per machine: 30s or a range 20s-40s', '30s')
    .option('--keyspace <size>', 'write this many bytes of keys (e.g. 256MiB) into the first member before the joins, so every learner has it to catch up')
    .option('--preload <size>', 'the older name of --keyspace')
    .option('--runs <n>', 'rounds of every mode, alternating which goes first', '1')
    .option(
      '--modes <list>',
      'modes to compare, comma-separated: serial (KCP order), parallel (one learner at a time), guarded (parallel, fastplane checks instead of etcd 5 s rule), learners and guarded-learners (the same with etcd 3.6 parallel learners)',
      'serial,parallel,guarded',
    )
    .option('--version <version>', 'etcd version, e.g. 3.4.23')
    .option('--kubernetes <version>', 'every machine also runs the Kubernetes control plane of this version (kube-apiserver, controller-manager, scheduler), e.g. 1.36.3; a run converges once every component is ready')
    .option('--method <method>', 'with --keyspace: scale-up (one member, the keys written, then the rest join; the writes not timed) or restore (all machines at once, the first restoring the keyspace snapshot)', 'scale-up')
    .option('--host-bandwidth <rate>', 'run on a network lab (namespaces, ssh provider; root), each host sending and receiving at most this rate (tc tbf each way), e.g. 100mbit')
    .option('--sweep', 'a bench per combination of the comma-separated --host-bandwidth (a rate or unlimited), --keyspace (0: none) and --provisioning-delay values; a JSON per cell and a summary')
    .option('--resume <dir>', 'with --sweep: go on with the sweep saved in this folder (cut short), running only the cells it had not finished; give the flags it was started with')
    .option('--asymmetric-lab', 'with --host-bandwidth: limit only what each host receives (no real NIC does this; named in every output)')
    .addOption(timeout())
    .addOption(new Option('-o, --output <format>', 'table or json').default('table'))
    .action(async (flags: Parameters<typeof benchCommand>[1]) =>
      withContext(program, async (ctx) => (flags.sweep === true ? (await import('./commands/bench-sweep.ts')).benchSweep(ctx, flags) : (await import('./commands/bench.ts')).benchCommand(ctx, flags))),
    );

  program
    .command('report <name>')
    .description('write a self-contained HTML timeline of a control plane (and the last bench comparison)')
    .option('--out <file>', 'where to write it (default <state dir>/reports/<name>.html)')
    .action(async (name: string, flags: { out?: string }) => withContext(program, async (ctx) => (await import('./commands/report.ts')).reportCommand(ctx, name, flags)));

  program
    .command('simulate')
    .description('what-if: serial (KCP order) vs parallel on the etcd model, in virtual time; with -f, bring-up, rollout and remediation of that manifest')
    .option('-f, --file <file>', 'ControlPlane or Cluster API KubeadmControlPlane manifest to simulate')
    .option('--replicas <n>', 'number of members (odd, 1..9; default 5, or the manifest\'s)')
    .option('--provisioning <duration>', 'provisioning time per machine: 30s or a range 8m-12m', '30s')
    .option('--runs <n>', 'simulated bring-ups per strategy', '100')
    .option('--seed <n>', 'first seed (run i uses seed + i)', '1')
    .addOption(output())
    .action(async (flags: SimulateFlags) => withContext(program, async () => (await import('./commands/simulate.ts')).simulateCommand(flags)));

  program
    .command('convert')
    .description('print the ControlPlane a manifest becomes (a Cluster API KubeadmControlPlane converted); mapping and ignored fields on stderr')
    .option('-f, --file <file>', 'KubeadmControlPlane (v1beta1 or v1beta2) or ControlPlane manifest')
    .addOption(new Option('-o, --output <format>', 'yaml or json').default('yaml'))
    .action(async (flags: { file?: string; output: string }) => withContext(program, async () => (await import('./commands/convert.ts')).convertCommand(flags)));

  program
    .command('crds')
    .description('print the CustomResourceDefinition of ControlPlane objects (controlplanes.fastplane.dev), generated from the manifest schema')
    .addOption(new Option('-o, --output <format>', 'yaml or json').default('yaml'))
    .action(async (flags: { output: string }) => withContext(program, async () => (await import('./commands/crds.ts')).crdsCommand(flags)));

  program
    .command('install')
    .description("apply the CRDs (fastplane crds) and the controller's least-privilege RBAC (a ServiceAccount, ClusterRole and binding) to a cluster with kubectl, and wait until the CRDs are served")
    .option('--kubectl <path>', 'the kubectl to run (default: the newest installed Kubernetes\'s)')
    .addOption(new Option('--timeout <duration>', 'give up after this long').default('60s'))
    .option('--kubeadm-control-plane-crd <file>', "also apply Cluster API's KubeadmControlPlane CRD from this file (scripts/install-cluster-api-crds.sh prints its path), served as v1beta2 only")
    // --kubeconfig is global (the kubernetes store's too): commander gives it to the program wherever it stands.
    .action(async (flags: InstallFlags) => withContext(program, async () => (await import('./commands/crds.ts')).installCommand({ ...flags, ...kubeconfigOf(program) })));

  program
    .command('controller')
    .description('reconcile every control plane in the store continuously: a work queue, leader election per cluster, Prometheus metrics')
    .option('--metrics-address <host:port>', 'where /metrics, /healthz and /readyz listen', '127.0.0.1:9464')
    .option('--id <name>', "this replica's name in leases, logs and metrics (default host name and PID)")
    .option('--max-concurrent-reconciles <n>', 'control planes reconciled at the same time, at most', '10')
    // --kubeconfig (global): also reconcile that management cluster's ControlPlane objects, with status, Events and a teardown finalizer.
    .option('--namespace <name>', "with --kubeconfig: only this namespace's ControlPlane objects (default: all namespaces)")
    .option('--relist-every <duration>', 'with --kubeconfig: list the objects again this often, whatever the watch says', '60s')
    .option('--kubeadm-control-planes', 'with --kubeconfig: also reconcile Cluster API KubeadmControlPlanes (v1beta2) annotated fastplane.dev/manage: "true"')
    .action(async (flags: ControllerFlags) =>
      withContext(program, async (ctx) => (await import('./commands/controller.ts')).controllerCommand(ctx, { ...flags, ...kubeconfigOf(program) }), { defaultLeaseTtlMs: 3_000, logToStdout: true }),
    );

  return program;
}

export async function main(argv: string[]): Promise<void> {
  // Only as the first argument: after a command, --version names an etcd version (up, rollout, bench).
  if (argv[2] === '--version' || argv[2] === '-V') {
    process.stdout.write(`${version}\n`);
    return;
  }
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; unknown flags and missing arguments are invalid input.
      process.exitCode = error.exitCode === 0 ? 0 : EXIT.invalid;
      return;
    }
    throw error;
  }
}

// grpc-js gives TLS the member's IP address as server name, which Node deprecates (DEP0123,
// grpc/grpc-node#1919) while still checking the certificate against that IP: noise to a CLI user.
process.noDeprecation = true;
await main(process.argv);
