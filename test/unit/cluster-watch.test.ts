import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { quorumLosses, type ClusterSample } from '../support/cluster-watch.ts';

const LEADER = 'https://127.0.0.1:2380';

function sample(at: number, voters: number, answeringVoters: number, leader: boolean): ClusterSample {
  const s: ClusterSample = { at, voters, learners: 0, answeringVoters, versions: [] };
  if (leader) s.leaderPeerURL = LEADER;
  return s;
}

// The watch guards "quorum held" in the e2e tests; these cases pin down what it counts as a loss.
describe('quorumLosses', () => {
  test('every voter answering, with a leader: no loss', () => {
    assert.deepEqual(quorumLosses([sample(0, 3, 3, true), sample(150, 5, 3, true)]), []);
  });

  test('fewer than a quorum of the voters answering is a loss, leader named or not', () => {
    const lost = [sample(150, 4, 2, true), sample(300, 3, 1, false)];
    assert.deepEqual(quorumLosses([sample(0, 4, 4, true), ...lost, sample(450, 3, 3, true)]), lost);
  });

  test('a leaderless moment while every voter answers, as during a leader transfer, is not a loss', () => {
    const samples = [sample(0, 4, 4, true), sample(150, 4, 4, false), sample(300, 4, 4, false), sample(450, 4, 4, true)];
    assert.deepEqual(quorumLosses(samples), []);
  });

  test('a leaderless stretch longer than an election takes is a loss, to its last sample', () => {
    const stretch = Array.from({ length: 22 }, (_, i) => sample(150 + i * 150, 3, 3, false));
    assert.deepEqual(quorumLosses([sample(0, 3, 3, true), ...stretch, sample(3_600, 3, 3, true)]), stretch);
    assert.deepEqual(quorumLosses(stretch), stretch, 'a stretch that runs to the end of the watch counts too');
  });

  test('no voters known yet is not a loss', () => {
    assert.deepEqual(quorumLosses([sample(0, 0, 0, true)]), []);
  });
});
