import assert from 'node:assert/strict';
import { InvalidInputError } from '../../src/api/errors.ts';

/** The problems of an input that must be refused; fails when it is accepted or throws something else. */
export function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof InvalidInputError, `expected InvalidInputError, got ${String(error)}`);
    return error.problems;
  }
  assert.fail('the input was accepted');
}
