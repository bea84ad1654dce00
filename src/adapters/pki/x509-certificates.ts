// @peculiar/x509 resolves its ASN.1 serializers through tsyringe, which needs a Reflect metadata
// polyfill loaded before it.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { webcrypto } from 'node:crypto';
import { writeFileAtomic } from '../state-files.ts';

/**
 * The x509 work every PKI of fastplane shares (etcd's in local-pki.ts, Kubernetes' in
 * kubernetes-pki.ts): ECDSA P-256 keys, self-signed CAs and the leaves they sign, as PEM files.
 * Private keys are 0600 from the moment they are written, and a key is written before its
 * certificate, so an existing certificate file means a complete pair.
 */

x509.cryptoProvider.set(webcrypto);

export { x509 };

export const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY_MS = 86_400_000;
// kubeadm's lifetimes: leaves need renewing yearly, a CA lasts ten years.
const CA_DAYS = 3650;
const LEAF_DAYS = 365;

export interface Authority {
  cert: x509.X509Certificate;
  key: webcrypto.CryptoKey;
}

export interface Leaf {
  /** The common name. */
  commonName: string;
  /** The subject's organization: the group a Kubernetes client certificate puts its user in. */
  organization?: string;
  usages: x509.ExtendedKeyUsage[];
  /** IP addresses the certificate is for (subjectAltName); none for a client. */
  addresses: string[];
  /** DNS names the certificate is for (subjectAltName). */
  dnsNames?: string[];
  /** Lifetime; LEAF_DAYS unless a test asks for less (FASTPLANE_CERT_VALIDITY). */
  validityMs?: number | undefined;
}

/** A self-signed CA: the key first, so an existing certificate file means a complete pair. */
export async function createAuthority(keyFile: string, certFile: string, subject: string): Promise<void> {
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
 * The signing key and its certificate. The certificate file is what members and clients trust: one
 * CA, or during a rotation the old and the new one, so the certificate is the one whose public key is
 * the key's.
 */
export async function loadAuthority(keyFile: string, certFile: string): Promise<Authority> {
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

/** The CA in these files, created first if it does not exist yet. */
export async function ensureAuthorityFiles(keyFile: string, certFile: string, subject: string): Promise<Authority> {
  if (!existsSync(certFile)) await createAuthority(keyFile, certFile, subject);
  return loadAuthority(keyFile, certFile);
}

/** Issues the pair unless the certificate exists; `renew` issues a new key and certificate regardless. */
export async function ensureLeaf(ca: Authority, certFile: string, keyFile: string, leaf: Leaf, renew = false): Promise<void> {
  if (!renew && existsSync(certFile)) return;
  const keys = await generateKeys();
  const notBefore = new Date();
  const names = [...leaf.addresses.map((value) => ({ type: 'ip' as const, value })), ...(leaf.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value }))];
  const subject = new x509.Name([...(leaf.organization === undefined ? [] : [{ O: [leaf.organization] }]), { CN: [leaf.commonName] }]);
  const cert = await x509.X509CertificateGenerator.create({
    subject,
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
      ...(names.length === 0 ? [] : [new x509.SubjectAlternativeNameExtension(names)]),
    ],
  });
  await writeFileAtomic(keyFile, await privateKeyPem(keys.privateKey), 0o600);
  await writeFileAtomic(certFile, cert.toString('pem'));
}

/** The IP addresses and DNS names a certificate file names (subjectAltName), each sorted. */
export async function subjectAltNames(certFile: string): Promise<{ addresses: string[]; dnsNames: string[] }> {
  const cert = new x509.X509Certificate(await readFile(certFile, 'utf8'));
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  const all = san?.names.items ?? [];
  return {
    addresses: all.filter((n) => n.type === 'ip').map((n) => n.value).sort(),
    dnsNames: all.filter((n) => n.type === 'dns').map((n) => n.value).sort(),
  };
}

/**
 * A key pair with no certificate (the Kubernetes service-account key): the private key, then the
 * public one, so an existing public key file means a complete pair.
 */
export async function ensureKeyPair(keyFile: string, publicKeyFile: string): Promise<void> {
  if (existsSync(publicKeyFile)) return;
  const keys = await generateKeys();
  await writeFileAtomic(keyFile, await privateKeyPem(keys.privateKey), 0o600);
  await writeFileAtomic(publicKeyFile, x509.PemConverter.encode(await webcrypto.subtle.exportKey('spki', keys.publicKey), 'PUBLIC KEY'));
}

function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}
