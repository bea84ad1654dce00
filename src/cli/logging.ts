import { chmodSync, existsSync, renameSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { DestinationStream, LevelWithSilent, Logger, StreamEntry } from 'pino';
import { InvalidInputError } from '../api/errors.ts';

type LogFormat = 'json' | 'pretty';

/** The log file is rotated when it has reached this size, as the CLI opens it. */
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;
/** Rotated files kept beside the live one: fastplane.log.1 (newest) .. fastplane.log.3 (oldest). */
const LOG_KEEP = 3;

export interface LogOptions {
  level: LevelWithSilent;
  /** Also to stderr in this format; without one, stderr carries progress and errors only. */
  format?: LogFormat;
  /** Also JSON lines on stdout: `fastplane controller`, whose output is its log. */
  stdout?: boolean;
}

const LEVELS: readonly LevelWithSilent[] = ['silent', 'fatal', 'error', 'warn', 'info', 'debug', 'trace'];
const isLevel = (text: string): text is LevelWithSilent => (LEVELS as readonly string[]).includes(text);

export function parseLogOptions(level: string, format: string | undefined): LogOptions {
  if (!isLevel(level)) throw new InvalidInputError([`--log-level: must be one of ${LEVELS.join(', ')}, got ${level}`]);
  if (format === undefined) return { level };
  if (format === 'json' || format === 'pretty') return { level, format };
  throw new InvalidInputError([`--log-format: must be json or pretty, got ${format}`]);
}

/**
 * Rotation at open time: every command is a short process that opens the file once, so checking the
 * size then bounds the file without a writer that counts bytes (a long `up` may overshoot by its own
 * log, which is small next to the bound).
 */
export function rotateLogFile(path: string, maxBytes = LOG_ROTATE_BYTES, keep = LOG_KEEP): void {
  if (!existsSync(path) || statSync(path).size < maxBytes) return;
  // Oldest first, so each rename lands on a name already moved out of the way; .keep is overwritten.
  for (let i = keep - 1; i >= 1; i--) {
    if (existsSync(`${path}.${String(i)}`)) renameSync(`${path}.${String(i)}`, `${path}.${String(i + 1)}`);
  }
  renameSync(path, `${path}.1`);
}

// pino loads when a command first logs: `--help`, `--version` and `status` without clusters never pay for it.
const requireLazily = createRequire(import.meta.url);

/** pino's numeric levels, as its records carry them. */
const LEVEL_LABELS: Readonly<Record<number, string>> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

const PRETTY_SKIPPED = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/** One compact human line per pino record: time, level, message, then the other fields as key=value. */
export function prettyLine(json: string): string {
  const record = JSON.parse(json) as Record<string, unknown>;
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '';
  const level = typeof record.level === 'number' ? (LEVEL_LABELS[record.level] ?? String(record.level)) : '';
  const fields = Object.entries(record)
    .filter(([key, value]) => !PRETTY_SKIPPED.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return `${[time, level.toUpperCase().padEnd(5), typeof record.msg === 'string' ? record.msg : '', ...fields].join(' ')}\n`;
}

/**
 * The CLI's logger: always the log file in the state dir (rotated by size), and stderr too when a
 * format is asked for (stderr otherwise carries progress and errors only, as the CLI contract says).
 */
export function openLogger(file: string, { level, format, stdout }: LogOptions): Logger {
  const { pino } = requireLazily('pino') as typeof import('pino');
  rotateLogFile(file);
  // The logger's level filters; every stream takes all it is given (a stream's own default is info).
  const streams: StreamEntry[] = [{ level: 'trace', stream: pino.destination({ dest: file, sync: true, mkdir: true, mode: 0o600 }) }];
  // The log names clusters, addresses and errors: private like the rest of the state dir, also when an
  // older version created it with the umask's mode.
  chmodSync(file, 0o600);
  if (stdout === true) streams.push({ level: 'trace', stream: pino.destination({ dest: 1, sync: true }) });
  if (format === 'json') streams.push({ level: 'trace', stream: pino.destination({ dest: 2, sync: true }) });
  if (format === 'pretty') {
    const pretty: DestinationStream = { write: (line) => process.stderr.write(prettyLine(line)) };
    streams.push({ level: 'trace', stream: pretty });
  }
  return pino({ level }, pino.multistream(streams));
}
