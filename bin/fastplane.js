#!/usr/bin/env node
// Runs the compiled CLI (`npm run build` writes dist/; `npm ci` and `npm pack` build it through the
// prepare script), so a start costs no TypeScript transpiling.
try {
  await import('../dist/cli/main.js');
} catch (error) {
  if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('/dist/cli/main.js')) {
    process.stderr.write('fastplane: dist/ is missing; run `npm run build` (npm ci does it)\n');
    process.exitCode = 1;
  } else {
    throw error;
  }
}
