import type { ControlPlane } from '../api/control-plane.ts';
import type { CareService } from '../care/care-service.ts';
import type { ObserveDeps } from '../cluster/observe.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import type { Logger } from '../ports/logger.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import type { ProcessIdentity, StateStore } from '../ports/state-store.ts';
import type { ReconcileDeps } from '../reconciler/run.ts';

/**
 * One control plane's ports: what observing reads (reads only: status), the provider's teardown and
 * client credentials, and its care.
 */
export interface ClusterPorts extends ObserveDeps {
  provider: MachineProvider;
  care: CareService;
  log: Logger;
}

/**
 * What the use cases run on: this host's ports, opened once by an entry point (the CLI, the
 * controller) and closed by it. The use cases never build an adapter themselves.
 */
export interface Runtime {
  readonly store: StateStore;
  /** Where the records are, for messages: the state dir, or the etcd endpoints and prefix. */
  readonly storeLocation: string;
  /** Backups, reports and the local provider's machines live here. */
  readonly stateDir: string;
  /** This process as its kernel knows it, for the lease records it writes. */
  readonly identity: ProcessIdentity | undefined;
  readonly leaseTtlMs: number;
  readonly log: Logger;
  /** The control plane's provider (spec.provider.name), one per control plane. */
  provider(manifest: ControlPlane): MachineProvider;
  /** The control plane's ports on this host, opened once for a use case and handed on to what it runs. */
  clusterPorts(manifest: ControlPlane): Promise<ClusterPorts>;
  /** What a reconcile pass needs over a control plane's ports, for each `writer` (fenced by the lease this process holds). */
  passDeps(ports: ClusterPorts, notify?: (event: EventRecord) => void): (writer: FencedWriter) => ReconcileDeps;
  /** Day-2 care of the control plane with this host's tools. */
  care(manifest: ControlPlane): CareService;
  /** InvalidInputError when this host has no etcd binaries for the spec's version. */
  checkBinaries(manifest: ControlPlane): void;
  /** The key that seals the providers' documents in the store, for messages: its name and key file. */
  readonly sealingKey: string;
  /** Seals the provider's documents of the control plane again with the key file's first key. */
  resealSecrets(manifest: ControlPlane): Promise<{ documents: number; resealed: number }>;
  /** The sha256 of a file (a snapshot to restore from). */
  sha256(file: string): Promise<string>;
}

/** A line a use case has to say while it works (who was asked to stop, what a rolling restart does). */
export type Note = (text: string) => void;
