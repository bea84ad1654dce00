import { join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';

// Where the local provider's certificates live, apart from local-pki.ts: naming the files needs no
// x509 library, and loading it costs every CLI start about half a second.

/** A member's certificate files (etcd --cert-file ... --peer-trusted-ca-file). */
export interface MemberTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  peerCertFile: string;
  peerKeyFile: string;
}

/** fastplane's client credentials of a cluster, in its `pki` folder. */
export function clientTlsFiles(pkiDir: string): TlsFiles {
  return { caFile: join(pkiDir, 'ca.crt'), certFile: join(pkiDir, 'client.crt'), keyFile: join(pkiDir, 'client.key') };
}

/** A member's files: the cluster's CA, its own certificates in memberDir. */
export function memberTlsFiles(pkiDir: string, memberDir: string): MemberTlsFiles {
  return {
    caFile: join(pkiDir, 'ca.crt'),
    certFile: join(memberDir, 'server.crt'),
    keyFile: join(memberDir, 'server.key'),
    peerCertFile: join(memberDir, 'peer.crt'),
    peerKeyFile: join(memberDir, 'peer.key'),
  };
}
