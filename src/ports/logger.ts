/**
 * The few logging calls the reconciler makes, as a port: the CLI passes its pino logger, the
 * simulator and most tests pass none, so the reconciler never depends on pino.
 */
export interface Logger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}
