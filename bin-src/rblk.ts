// rblk: the initiator's command line (docs/cli.md). Exit status 0 on
// success, 1 when the operation failed, 2 for a wrong command line.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hideBin } from 'yargs/helpers';
import { main } from '../initiator/cli/main.js';

/** The package's version, from the package.json above this file (source or dist layout). */
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const p = join(dir, 'package.json');
    if (existsSync(p)) return (JSON.parse(readFileSync(p, 'utf8')) as { version?: string }).version ?? 'unknown';
    dir = dirname(dir);
  }
  return 'unknown';
}

// Exit only once stdout has drained: a pipe may still hold the end of `read`'s data.
main(hideBin(process.argv), packageVersion()).then((code) => {
  process.stdout.write('', () => process.exit(code));
});
