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
  /** What observing needs: reads only (status). */
  observeDeps(manifest: ControlPlane): Promise<ObserveDeps>;
  /** What a reconcile pass needs, for each `writer` (fenced by the lease this process holds). */
  depsFor(manifest: ControlPlane, notify?: (event: EventRecord) => void): Promise<(writer: FencedWriter) => ReconcileDeps>;
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
