import { createHash, hash } from 'node:crypto';

/**
 * etcd gives a member of a new cluster the ID sha1(sorted peer URLs + --initial-cluster-token), first
 * 8 bytes, with no time in it; a member added later also hashes the Unix second, so its ID is as good
 * as random (docs/etcd-behaviour.md, member IDs). Returned as a decimal string, as fastplane keeps IDs.
 */
export function initialMemberId(peerURLs: readonly string[], clusterToken: string): string {
  const hash = createHash('sha1').update([...peerURLs].sort().join('') + clusterToken).digest();
  return hash.readBigUInt64BE(0).toString();
}

/** Below this an initial member's ID sorts before a random learner ID with odds 1 - 2^-14. */
export const LOW_MEMBER_ID = 2n ** 50n;

/** Tokens already searched for, by base and peer URLs: a simulation starts the same members thousands of times. */
const foundTokens = new Map<string, string>();
const FOUND_TOKENS_KEPT = 1024;

/**
 * The cluster token that gives the member starting a cluster an ID below every learner's, in all
 * likelihood. A joining member asks the members one by one in ID order, 7 s each, before it takes its
 * snapshot, and a learner still catching up cannot answer; with the first member first, the joiner
 * asks a caught-up voter first. Deterministic: the same base and peer URLs give the same token.
 */
export function tokenForLowMemberId(base: string, peerURLs: readonly string[]): string {
  const urls = [...peerURLs].sort().join('');
  const key = `${base}\n${urls}`;
  const known = foundTokens.get(key);
  if (known !== undefined) return known;
  for (let attempt = 0; ; attempt++) {
    const token = `${base}-${attempt.toString(36)}`;
    // About 16,000 tries on average: the one-shot hex digest, whose first 14 bits are the ID's top
    // bits (below 2^50: "000" and then 0-3), costs a seventh of a Hash object's.
    if (/^000[0-3]/.test(hash('sha1', urls + token))) {
      if (foundTokens.size >= FOUND_TOKENS_KEPT) foundTokens.clear();
      foundTokens.set(key, token);
      return token;
    }
  }
}

/** The peer URLs `--initial-cluster` lists for one member name. */
export function peerURLsIn(initialCluster: string, memberName: string): string[] {
  return initialCluster.split(',').flatMap((entry) => {
    const at = entry.indexOf('=');
    return at > 0 && entry.slice(0, at) === memberName ? [entry.slice(at + 1)] : [];
  });
}
