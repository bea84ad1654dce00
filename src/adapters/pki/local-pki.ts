import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { clientTlsFiles, memberTlsFiles, type MemberTlsFiles } from './pki-files.ts';
import type { CertificateInfo } from '../../ports/care.ts';
import type { CaRotationPhase } from '../../ports/machine-provider.ts';
import { withLock, writeFileAtomic } from '../state-files.ts';
import { createAuthority, ensureAuthorityFiles, ensureLeaf, loadAuthority, x509, type Authority, type Leaf } from './x509-certificates.ts';

/**
 * Certificates of the local provider's clusters, as kubeadm lays them out for etcd: one CA per
 * cluster, per member a server and a peer certificate for its IP address, and one client certificate
 * for fastplane (x509-certificates.ts makes them). Every step is idempotent and re-running it after a
 * crash issues only what is missing.
 */

/**
 * Issues what a member at `address` needs, creating the cluster's CA and fastplane's client
 * certificate first if this is the cluster's first machine.
 */
export async function issueMemberCertificates(pkiDir: string, memberDir: string, name: string, address: string, options: { renew?: boolean; validityMs?: number | undefined } = {}): Promise<MemberTlsFiles> {
  const ca = await ensureAuthority(pkiDir, options.validityMs);
  const renew = options.renew === true;
  const files = memberTlsFiles(pkiDir, memberDir);
  await mkdir(memberDir, { recursive: true, mode: 0o700 });
  // Both usages on both: a member is its peers' client and server, and etcd's gRPC gateway dials the
  // member's own client port presenting the server certificate. etcd also checks the IP addresses of
  // a client certificate against the connection's source address, and a connection between loopback
  // addresses leaves from 127.0.0.1 (kubeadm's etcd certificates name 127.0.0.1 too).
  const leaf: Leaf = { commonName: name, usages: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], addresses: [address, '127.0.0.1'], validityMs: options.validityMs };
  await ensureLeaf(ca, files.certFile, files.keyFile, leaf, renew);
  await ensureLeaf(ca, files.peerCertFile, files.peerKeyFile, leaf, renew);
  return files;
}

/** A new client certificate and key for fastplane, from the cluster's CA (`certs renew`). */
export async function renewClientCertificate(pkiDir: string, validityMs?: number): Promise<void> {
  const ca = await ensureAuthority(pkiDir, validityMs);
  const client = clientTlsFiles(pkiDir);
  await ensureLeaf(ca, client.certFile, client.keyFile, { ...CLIENT_LEAF, validityMs }, true);
}

export async function describeCertificate(file: string): Promise<CertificateInfo> {
  const cert = new x509.X509Certificate(await readFile(file, 'utf8'));
  return { file, subject: cert.subject, issuer: cert.issuer, notBefore: cert.notBefore.toISOString(), notAfter: cert.notAfter.toISOString() };
}

const CLIENT_LEAF: Leaf = { commonName: 'fastplane', usages: [x509.ExtendedKeyUsage.clientAuth], addresses: [] };

/** The cluster's etcd CA (and fastplane's client certificate), created on first use. */
export async function ensureAuthority(pkiDir: string, validityMs?: number): Promise<Authority> {
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  // The CA key lives here: private to the owner even when the folder came from an older version.
  await chmod(pkiDir, 0o700);
  const certFile = join(pkiDir, 'ca.crt');
  const keyFile = join(pkiDir, 'ca.key');
  // A cluster's machines are created in parallel (and maybe by two CLI processes): one CA only.
  return withLock(join(pkiDir, 'ca.lock'), async () => {
    const ca = await ensureAuthorityFiles(keyFile, certFile, CA_SUBJECT);
    const client = clientTlsFiles(pkiDir);
    await ensureLeaf(ca, client.certFile, client.keyFile, { ...CLIENT_LEAF, validityMs });
    return ca;
  });
}

const CA_SUBJECT = 'CN=fastplane-etcd-ca';

/** A CA's files as a rotation sees them: its trusted certificate file (a bundle during a rotation), its signing key, its subject. */
export interface RotatingAuthority {
  cert: string;
  key: string;
  subject: string;
}

/** Where a rotation keeps the CA it brings in, beside the CA's own files. */
export function nextFiles(ca: Pick<RotatingAuthority, 'cert' | 'key'>): { cert: string; key: string } {
  return { cert: ca.cert.replace(/\.crt$/, '-next.crt'), key: ca.key.replace(/\.key$/, '-next.key') };
}

/** The cluster's etcd CA, as rotateAuthority sees it. */
export function etcdAuthority(pkiDir: string): RotatingAuthority {
  return { cert: join(pkiDir, 'ca.crt'), key: join(pkiDir, 'ca.key'), subject: CA_SUBJECT };
}

/**
 * CA rotation in three steps, each idempotent (a rerun after a crash repeats the step it stopped in):
 * `trust` creates the next CA (ca-next.key, ca-next.crt) and makes ca.crt the bundle old + new;
 * `switch` makes the next CA's key the signing key (leaves issued from then on chain to the new CA)
 * and puts its certificate first in the bundle (a reader taking the first certificate as the key's
 * finds it there); `finish` leaves only the new CA in ca.crt and removes ca-next.*. The caller holds
 * the lock of the CA's folder.
 */
export async function rotateAuthority(ca: RotatingAuthority, step: 'trust' | 'switch' | 'finish'): Promise<void> {
  const next = nextFiles(ca);
  if (step === 'trust') {
    // A distinct subject: which CA issued a certificate shows in its issuer.
    if (!existsSync(next.cert)) await createAuthority(next.key, next.cert, `${ca.subject}-${new Date().toISOString().replace(/[-:.]/g, '')}`);
    const current = await loadAuthority(ca.key, ca.cert);
    await writeFileAtomic(ca.cert, `${current.cert.toString('pem')}\n${(await readFile(next.cert, 'utf8')).trim()}\n`);
  } else if (step === 'switch') {
    const nextPem = (await readFile(next.cert, 'utf8')).trim();
    const bundle = await readFile(ca.cert, 'utf8');
    if (!bundle.includes(nextPem)) throw new Error(`${ca.cert} does not trust the next CA yet`);
    await writeFileAtomic(ca.key, await readFile(next.key, 'utf8'), 0o600);
    const others = x509.PemConverter.decode(bundle).map((der) => new x509.X509Certificate(der).toString('pem')).filter((pem) => pem.trim() !== nextPem);
    await writeFileAtomic(ca.cert, `${[nextPem, ...others].join('\n')}\n`);
  } else {
    if (existsSync(next.cert)) {
      const signing = await loadAuthority(ca.key, ca.cert);
      await writeFileAtomic(ca.cert, `${signing.cert.toString('pem')}\n`);
    }
    await rm(next.key, { force: true });
    await rm(next.cert, { force: true });
  }
}

/** The CA a rotation is bringing in (its first phase made it); throws when no rotation made one. */
export async function nextAuthority(pkiDir: string): Promise<Authority> {
  const next = nextFiles(etcdAuthority(pkiDir));
  if (!existsSync(next.cert)) throw new Error(`no CA rotation in progress in ${pkiDir}`);
  return loadAuthority(next.key, next.cert);
}

const ROTATION_FILE = 'ca-rotation.json';

/** What a rotation's phase does to a CA's files; undefined: the rotation ends. */
export function rotationStep(phase: CaRotationPhase | undefined): 'trust' | 'switch' | 'finish' {
  return phase === 'trust' ? 'trust' : phase === 'reissue' ? 'switch' : 'finish';
}

/** The rolling restart a CA rotation needs next, from its state file in the cluster's PKI dir; undefined: none in progress. */
export async function caRotationPhase(pkiDir: string): Promise<CaRotationPhase | undefined> {
  const file = join(pkiDir, ROTATION_FILE);
  if (!existsSync(file)) return undefined;
  return (JSON.parse(await readFile(file, 'utf8')) as { phase: CaRotationPhase }).phase;
}

/**
 * Moves a CA rotation on: changes the CA files for `phase` (trust: bundle old + new; reissue: sign
 * with the new key; drop: trust the new CA only) and records the phase, or ends it (undefined).
 */
export async function advanceCaRotation(pkiDir: string, phase: CaRotationPhase | undefined): Promise<void> {
  const file = join(pkiDir, ROTATION_FILE);
  await withLock(join(pkiDir, 'ca.lock'), () => rotateAuthority(etcdAuthority(pkiDir), rotationStep(phase)));
  if (phase === undefined) await rm(file, { force: true });
  else await writeFileAtomic(file, `${JSON.stringify({ phase })}\n`, 0o600);
}
