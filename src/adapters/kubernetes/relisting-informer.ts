import { makeInformer, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';

/**
 * client-node's informer (ListWatch, 1.x) with what it leaves to its user: it re-lists by itself only
 * on 410 Gone, and after any other watch or list error (ECONNRESET, the API server restarting) it
 * emits `error` and stops for good; its watch request has no timeout, so a connection that dies
 * without a FIN or RST can leave it waiting silently (docs/management-cluster.md). This one starts a
 * fresh informer (a fresh list, so nothing missed in between is lost) after each error, with backoff,
 * and every `relistEveryMs` whatever happened.
 */

export interface RelistingInformerOptions {
  kubeconfig: KubeConfig;
  /** The watch path, such as /apis/fastplane.dev/v1alpha1/controlplanes. */
  path: string;
  list: () => Promise<KubernetesListObject<KubernetesObject>>;
  relistEveryMs: number;
  onObject: (object: KubernetesObject) => void;
  /** Why the informer was started again (an error of the watch or the list). */
  onTrouble: (message: string) => void;
}

const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 10_000;

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' || typeof code === 'number' ? `${error.message} (${String(code)})` : error.message;
  }
  return String(error);
}

export class RelistingInformer {
  /** Each informer started gets the next number; callbacks of an older one are ignored. */
  private current = 0;
  private informer: ReturnType<typeof makeInformer> | undefined;
  private backoffMs = BACKOFF_FIRST_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly relistTimer: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: RelistingInformerOptions) {
    this.relistTimer = setInterval(() => {
      this.restart();
    }, options.relistEveryMs);
    this.restart();
  }

  close(): void {
    this.closed = true;
    clearInterval(this.relistTimer);
    clearTimeout(this.restartTimer);
    this.stopCurrent();
  }

  private stopCurrent(): void {
    const old = this.informer;
    this.informer = undefined;
    // Stopping aborts its watch request, which the old informer reports as an error: ignored, as it is no longer current.
    if (old) void old.stop();
  }

  private restart(): void {
    if (this.closed) return;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    // Numbered before the old one stops: its stop aborts its watch, which it may report as an error at
    // once, and that error must not count as the current informer's (it would relist again, forever).
    const id = ++this.current;
    this.stopCurrent();
    const { kubeconfig, path, list, onObject } = this.options;
    const informer = makeInformer(kubeconfig, path, list);
    const live = (): boolean => id === this.current && !this.closed;
    const deliver = (object: KubernetesObject): void => {
      if (live()) onObject(object);
    };
    informer.on('add', deliver);
    informer.on('update', deliver);
    informer.on('error', (error: unknown) => {
      if (!live()) return;
      this.scheduleRestart(`the watch of ${path} ended: ${describe(error)}`);
    });
    this.informer = informer;
    // start() resolves once listed and watching, or after reporting an error (then a restart is due).
    informer.start().then(
      () => {
        if (live() && this.restartTimer === undefined) this.backoffMs = BACKOFF_FIRST_MS;
      },
      (error: unknown) => {
        if (live()) this.scheduleRestart(`the list of ${path} failed: ${describe(error)}`);
      },
    );
  }

  private scheduleRestart(why: string): void {
    if (this.restartTimer !== undefined) return;
    const delayMs = this.backoffMs;
    this.backoffMs = Math.min(BACKOFF_MAX_MS, this.backoffMs * 2);
    this.options.onTrouble(`${why}; listing again in ${String(delayMs)} ms`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restart();
    }, delayMs);
  }
}
