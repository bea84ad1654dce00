/** What a member says of its versions (`/version` on its client URL). */
export interface MemberVersions {
  /** The binary's version, e.g. 3.6.17. */
  server: string;
  /** The version the cluster runs at, major.minor.0: lowered to the target as soon as a downgrade is enabled. */
  cluster: string;
  /** The schema of its backend (3.6 and later only). */
  storage?: string;
}

export type DowngradeStep = 'validate' | 'enable' | 'cancel';

/**
 * etcd's downgrade protocol, as its guides run it: etcdctl of the version the members run now (etcdctl
 * 3.5 has no `downgrade` command), so each step is the one etcd documents for that version.
 */
export interface EtcdDowngrade {
  /** `etcdctl downgrade validate|enable <targetMinor>` or `downgrade cancel`, with `toolVersion`'s etcdctl; returns what it printed. */
  run(step: DowngradeStep, endpoints: readonly string[], targetMinor: string, toolVersion: string): Promise<string>;
  /** `/version` of one member; `timeoutMs` shortens the adapter's own deadline. */
  versions(endpoint: string, timeoutMs?: number): Promise<MemberVersions>;
}
