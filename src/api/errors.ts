/** Input the user can fix (bad manifest, flag, version, port): the CLI exits 2 and prints the message. */
export class InvalidInputError extends Error {
  override readonly name = 'InvalidInputError';
  constructor(readonly problems: readonly string[]) {
    super(problems.join('\n'));
  }
}
