// @peculiar/x509 resolves its ASN.1 serializers through tsyringe, which needs a Reflect metadata
// polyfill loaded before it.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { webcrypto } from 'node:crypto';
import { join } from 'node:path';
import { clientTlsFiles, memberTlsFiles, type MemberTlsFiles } from './pki-files.ts';
import type { CertificateInfo } from '../../ports/care.ts';
import type { CaRotationPhase } from '../../ports/machine-provider.ts';
import { withLock, writeFileAtomic } from '../state-files.ts';

/**
 * Certificates of the local provider's clusters, as kubeadm lays them out for etcd: one CA per
 * cluster (ECDSA P-256), per member a server and a peer certificate for its IP address, and one client
 * certificate for fastplane. PEM files; private keys are 0600 from the moment they are written. A key
 * is written before its certificate, so an existing certificate file means a complete pair: every
 * step is idempotent and re-running it after a crash issues only what is missing.
 */

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY_MS = 86_400_000;
// kubeadm's lifetimes: members and clients need new certificates yearly, the CA lasts ten years.
const CA_DAYS = 3650;
const LEAF_DAYS = 365;

interface Authority {
  cert: x509.X509Certificate;
  key: webcrypto.CryptoKey;
}

interface Leaf {
  subject: string;
  usages: x509.ExtendedKeyUsage[];
  /** IP addresses the certificate is for (subjectAltName); none for a client. */
  addresses: string[];
  /** Lifetime; LEAF_DAYS unless a test asks for less (FASTPLANE_CERT_VALIDITY). */
  validityMs?: number | undefined;
}

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
  const leaf: Leaf = { subject: `CN=${name}`, usages: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], addresses: [address, '127.0.0.1'], validityMs: options.validityMs };
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

const CLIENT_LEAF: Leaf = { subject: 'CN=fastplane', usages: [x509.ExtendedKeyUsage.clientAuth], addresses: [] };

async function ensureAuthority(pkiDir: string, validityMs?: number): Promise<Authority> {
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  // The CA key lives here: private to the owner even when the folder came from an older version.
  await chmod(pkiDir, 0o700);
  const certFile = join(pkiDir, 'ca.crt');
  const keyFile = join(pkiDir, 'ca.key');
  // A cluster's machines are created in parallel (and maybe by two CLI processes): one CA only.
  return withLock(join(pkiDir, 'ca.lock'), async () => {
    if (!existsSync(certFile)) await createAuthority(keyFile, certFile, CA_SUBJECT);
    const ca = await loadAuthority(keyFile, certFile);
    const client = clientTlsFiles(pkiDir);
    await ensureLeaf(ca, client.certFile, client.keyFile, { ...CLIENT_LEAF, validityMs });
    return ca;
  });
}

const CA_SUBJECT = 'CN=fastplane-etcd-ca';

/** A self-signed CA: the key first, so an existing certificate file means a complete pair. */
async function createAuthority(keyFile: string, certFile: string, subject: string): Promise<void> {
  const keys = await generateKeys();
  const notBefore = new Date();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: subject,
    keys,
    notBefore,
    notAfter: new Date(notBefore.getTime() + CA_DAYS * DAY_MS),
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  await writeFileAtomic(keyFile, await privateKeyPem(keys.privateKey), 0o600);
  await writeFileAtomic(certFile, cert.toString('pem'));
}

/** The SubjectPublicKeyInfo of a private key, to find its certificate in a bundle. */
async function publicKeyInfo(keyPem: string): Promise<Buffer> {
  const key = await webcrypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(keyPem), ALGORITHM, true, ['sign']);
  // The private JWK without its private part `d` is the public key.
  const jwk: webcrypto.JsonWebKey = await webcrypto.subtle.exportKey('jwk', key);
  delete jwk.d;
  const pub = await webcrypto.subtle.importKey('jwk', { ...jwk, key_ops: ['verify'] }, ALGORITHM, true, ['verify']);
  return Buffer.from(await webcrypto.subtle.exportKey('spki', pub));
}

/**
 * The signing key and its certificate. `ca.crt` is what members and clients trust: one CA, or during
 * a rotation (`certs renew --ca`) the old and the new one, so the certificate is the one whose public
 * key is the key's.
 */
async function loadAuthority(keyFile: string, certFile: string): Promise<Authority> {
  const keyPem = await readFile(keyFile, 'utf8');
  const certs = x509.PemConverter.decode(await readFile(certFile, 'utf8')).map((der) => new x509.X509Certificate(der));
  let cert = certs[0];
  if (certs.length > 1) {
    const spki = await publicKeyInfo(keyPem);
    cert = certs.find((c) => Buffer.from(c.publicKey.rawData).equals(spki));
  }
  if (!cert) throw new Error(`${certFile} holds no certificate for the key in ${keyFile}`);
  return { cert, key: await webcrypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(keyPem), ALGORITHM, false, ['sign']) };
}

/**
 * CA rotation in three steps, each idempotent (a rerun after a crash repeats the step it stopped in):
 * `trust` creates the next CA (ca-next.key, ca-next.crt) and makes ca.crt the bundle old + new;
 * `switch` makes the next CA's key the signing key (leaves issued from then on chain to the new CA);
 * `finish` leaves only the new CA in ca.crt and removes ca-next.*.
 */
export async function rotateAuthority(pkiDir: string, step: 'trust' | 'switch' | 'finish'): Promise<void> {
  const certFile = join(pkiDir, 'ca.crt');
  const keyFile = join(pkiDir, 'ca.key');
  const nextCert = join(pkiDir, 'ca-next.crt');
  const nextKey = join(pkiDir, 'ca-next.key');
  await withLock(join(pkiDir, 'ca.lock'), async () => {
    if (step === 'trust') {
      // A distinct subject: which CA issued a certificate shows in its issuer.
      if (!existsSync(nextCert)) await createAuthority(nextKey, nextCert, `${CA_SUBJECT}-${new Date().toISOString().replace(/[-:.]/g, '')}`);
      const current = await loadAuthority(keyFile, certFile);
      const next = await readFile(nextCert, 'utf8');
      await writeFileAtomic(certFile, `${current.cert.toString('pem')}\n${next.trim()}\n`);
    } else if (step === 'switch') {
      const current = await readFile(certFile, 'utf8');
      if (!current.includes((await readFile(nextCert, 'utf8')).trim())) throw new Error(`${certFile} does not trust the next CA yet`);
      await writeFileAtomic(keyFile, await readFile(nextKey, 'utf8'), 0o600);
    } else {
      if (existsSync(nextCert)) {
        const signing = await loadAuthority(keyFile, certFile);
        await writeFileAtomic(certFile, `${signing.cert.toString('pem')}\n`);
      }
      await rm(nextKey, { force: true });
      await rm(nextCert, { force: true });
    }
  });
}

/** Issues the pair unless the certificate exists; `renew` issues a new key and certificate regardless. */
async function ensureLeaf(ca: Authority, certFile: string, keyFile: string, leaf: Leaf, renew = false): Promise<void> {
  if (!renew && existsSync(certFile)) return;
  const keys = await generateKeys();
  const notBefore = new Date();
  const cert = await x509.X509CertificateGenerator.create({
    subject: leaf.subject,
    issuer: ca.cert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + (leaf.validityMs ?? LEAF_DAYS * DAY_MS)),
    signingAlgorithm: ALGORITHM,
    publicKey: keys.publicKey,
    signingKey: ca.key,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(leaf.usages),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert.publicKey),
      ...(leaf.addresses.length === 0 ? [] : [new x509.SubjectAlternativeNameExtension(leaf.addresses.map((value) => ({ type: 'ip' as const, value })))]),
    ],
  });
  await writeFileAtomic(keyFile, await privateKeyPem(keys.privateKey), 0o600);
  await writeFileAtomic(certFile, cert.toString('pem'));
}

function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

const ROTATION_FILE = 'ca-rotation.json';

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
  if (phase === undefined) {
    await rotateAuthority(pkiDir, 'finish');
    await rm(file, { force: true });
    return;
  }
  await rotateAuthority(pkiDir, phase === 'trust' ? 'trust' : phase === 'reissue' ? 'switch' : 'finish');
  await writeFileAtomic(file, `${JSON.stringify({ phase })}\n`, 0o600);
}
