// rblk: the initiator's command line (docs/cli.md). Exit status 0 on
// success, 1 when the operation failed, 2 for a wrong command line.
import { hideBin } from 'yargs/helpers';
import { main } from '../initiator/cli/main.js';
import { packageVersion } from './package-version.js';

// Exit only once stdout has drained: a pipe may still hold the end of `read`'s data.
main(hideBin(process.argv), packageVersion()).then((code) => {
  process.stdout.write('', () => process.exit(code));
});
