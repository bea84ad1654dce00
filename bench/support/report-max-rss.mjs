// Preloaded into each measured CLI start (node --import): writes the process's peak RSS (KiB) to
// $FASTPLANE_RSS_FILE when it exits, so the figure is the process's own, not a sample of it.
import { writeFileSync } from 'node:fs';

process.on('exit', () => {
  const file = process.env.FASTPLANE_RSS_FILE;
  if (file) writeFileSync(file, String(process.resourceUsage().maxRSS));
});
