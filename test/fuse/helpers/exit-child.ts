// Child process for exit.test.ts: attaches a memory volume at argv[2], says
// "ready", then leaves the way argv[3] names, without closing anything.
import { attachFuse } from '../../../initiator/fuse/index.js';
import { MemoryDevice } from '../../helpers/memory-device.js';

const [dir, how] = process.argv.slice(2);
const att = await attachFuse(new MemoryDevice({ size: 1 << 20 }), dir);
process.stdout.write(`ready ${att.path}\n`);
process.stdin.once('data', () => {
  if (how === 'exit') process.exit(3);
  throw new Error('uncaught on purpose');
});
