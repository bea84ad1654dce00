import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlane } from '../api/control-plane.ts';
import type { CertificateInfo } from '../ports/care.ts';
import { underClusterLease, type LeaseWork } from './lease.ts';
import { storedManifest } from './records.ts';
import type { Note, Runtime } from './runtime.ts';

async function securedManifest(runtime: Runtime, name: string, what: string): Promise<ControlPlane> {
  const manifest = await storedManifest(runtime, name);
  if (manifest.spec.provider.insecure) throw new InvalidInputError([`control plane ${name} runs without TLS (spec.provider.insecure): it has no certificates${what}`]);
  return manifest;
}

/** Renews member and client certificates (with `rotateCa`, rotates the CA) under the cluster's lease; returns the machines renewed. */
export async function renewCertificates(runtime: Runtime, name: string, rotateCa: boolean, onNote: Note): Promise<LeaseWork<string[]>> {
  const care = runtime.care(await securedManifest(runtime, name, ' to renew'));
  return underClusterLease(runtime, name, rotateCa ? 'CA rotation' : 'certificate renewal', (writer) => (rotateCa ? care.rotateCertificateAuthority(writer, onNote) : care.renewCertificates(writer, onNote)), onNote);
}

/** Every certificate file of the control plane with its subject and validity. */
export async function certificatesOf(runtime: Runtime, name: string): Promise<CertificateInfo[]> {
  return runtime.care(await securedManifest(runtime, name, '')).certificates();
}
