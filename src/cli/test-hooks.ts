import { parseDuration } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { failpointsFrom, type FailpointHook } from '../executor/failpoints.ts';

/**
 * Hooks that only tests may use: failpoints (the process SIGKILLs itself), injected etcd faults, a
 * machine's provisioning-failure marker file and another loopback range for the local provider. All
 * are off unless FASTPLANE_TEST_HOOKS=1; setting one without it is an input error, so no environment
 * can turn them on by accident in a real deployment.
 */
export interface TestHooks {
  failpoint: FailpointHook;
  /** FASTPLANE_INJECT_FAULTS, comma-separated fault names. */
  injectFaults: string | undefined;
  /** First two octets of the local provider's addresses (default 127.77). */
  addressPrefix: string;
  /** Whether the local provider honours a machine's `provisioning-failed` file. */
  provisioningFailureMarker: boolean;
  /** FASTPLANE_CERT_VALIDITY: member and client certificates issued with this lifetime (to test renewal ahead of expiry). */
  certValidityMs: number | undefined;
  /** FASTPLANE_BENCH_CALIBRATION: a file whose calibration the bench takes instead of measuring one (to test its bound checks). */
  benchCalibrationFile: string | undefined;
}

const GATED = ['FASTPLANE_FAILPOINTS', 'FASTPLANE_INJECT_FAULTS', 'FASTPLANE_ADDRESS_PREFIX', 'FASTPLANE_CERT_VALIDITY', 'FASTPLANE_BENCH_CALIBRATION'] as const;
const DEFAULT_ADDRESS_PREFIX = '127.77';

export function testHooksFromEnv(env: NodeJS.ProcessEnv = process.env): TestHooks {
  const enabled = env.FASTPLANE_TEST_HOOKS === '1';
  if (!enabled) {
    const set = GATED.filter((name) => (env[name] ?? '') !== '');
    if (set.length > 0) {
      throw new InvalidInputError(set.map((name) => `${name}: a test hook, refused unless FASTPLANE_TEST_HOOKS=1 (tests only); unset it`));
    }
    return { failpoint: failpointsFrom(undefined), injectFaults: undefined, addressPrefix: DEFAULT_ADDRESS_PREFIX, provisioningFailureMarker: false, certValidityMs: undefined, benchCalibrationFile: undefined };
  }
  const prefix = env.FASTPLANE_ADDRESS_PREFIX ?? DEFAULT_ADDRESS_PREFIX;
  const match = /^127\.(\d{1,3})$/.exec(prefix);
  if (!match || Number(match[1]) > 255) {
    throw new InvalidInputError([`FASTPLANE_ADDRESS_PREFIX: must be 127.N with N in 0..255 (machines stay on loopback, 127.0.0.0/8), got ${prefix}`]);
  }
  const validity = env.FASTPLANE_CERT_VALIDITY;
  const certValidityMs = validity === undefined || validity === '' ? undefined : parseDuration(validity);
  if (certValidityMs === 0 || (certValidityMs === undefined && validity !== undefined && validity !== '')) {
    throw new InvalidInputError([`FASTPLANE_CERT_VALIDITY: must be a positive duration such as 480h, got ${validity ?? ''}`]);
  }
  return { failpoint: failpointsFrom(env.FASTPLANE_FAILPOINTS), injectFaults: env.FASTPLANE_INJECT_FAULTS, addressPrefix: prefix, provisioningFailureMarker: true, certValidityMs, benchCalibrationFile: env.FASTPLANE_BENCH_CALIBRATION || undefined };
}
