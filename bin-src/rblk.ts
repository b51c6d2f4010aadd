// rblk: the initiator's command line (docs/cli.md). Exit status 0 on
// success, 1 when the operation failed, 2 for a wrong command line.
import { hideBin } from 'yargs/helpers';
import { main } from '../initiator/cli/main.js';
import { packageVersion } from './package-version.js';

// Exit only once stdout has drained: a pipe may still hold the end of `read`'s data.
// main() reports its own failures; anything that still escapes it is a bug,
// printed with its stack, and the operation failed (status 1).
main(hideBin(process.argv), packageVersion()).then(
  (code) => {
    process.stdout.write('', () => process.exit(code));
  },
  (e: unknown) => {
    process.stderr.write(`rblk: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
