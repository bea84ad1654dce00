/**
 * The CLI's exit codes: the contract scripts rely on. A module of its own so main.ts can map failures
 * to them without loading any command.
 */
export const EXIT = { converged: 0, internal: 1, invalid: 2, blocked: 3, deadline: 4, superseded: 5 } as const;
