/** A safety gate said no (a lease holder that would not stop, an unhealthy cluster): exit 3, nothing changed by this step. */
export class BlockedError extends Error {
  override readonly name = 'BlockedError';
}
