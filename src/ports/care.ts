import type { FencedWriter } from '../lease/fenced-writer.ts';
import type { ObservedCare } from '../planner/types.ts';

/**
 * Day-2 care of one control plane, as the reconcile loop needs it: what the backups folder and the
 * certificates on disk show (reads only: `status` observes too), and the work the planner's care
 * actions ask for. Each operation is idempotent: run twice, it leaves what one run leaves.
 */
export interface CarePort {
  observe(): Promise<ObservedCare>;
  /** Takes one verified backup and prunes the oldest beyond `keep`; returns a line describing it. */
  takeBackup(keep: number): Promise<string>;
  /** Renews member and client certificates, members restarted one at a time behind the health gate. */
  renewCertificates(writer: FencedWriter): Promise<string[]>;
  /** Compacts all history, defragments every member (leader last), disarms NOSPACE; returns the reasons. */
  recoverNoSpace(writer: FencedWriter): Promise<string[]>;
  /** Compacts to the retained window and defragments members above the threshold (leader last); returns the reasons. */
  maintain(writer: FencedWriter, options: { retainRevisions: number; fragmentationThreshold: number }): Promise<string[]>;
}
