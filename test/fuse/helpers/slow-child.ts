// Child process for test/target/fast-path-orphan.test.ts: a slow device in
// another process, as an NFS server or a failing disk is. It attaches a
// memory volume at argv[2] through FUSE and says "ready <file>". On stdin,
// "hold" makes writes wait (it says "waiting" when one arrives), "release"
// lets them go, "exit" unmounts and exits.
import { createInterface } from 'node:readline';
import { attachFuse } from '../../../initiator/fuse/index.js';
import { MemoryDevice } from '../../helpers/memory-device.js';

class SlowDevice extends MemoryDevice {
  held = false;
  readonly #open: (() => void)[] = [];

  override async write(offset: number, buf: Buffer, opts: { fua?: boolean } = {}): Promise<void> {
    if (this.held) {
      process.stdout.write('waiting\n');
      await new Promise<void>((r) => this.#open.push(r));
    }
    return super.write(offset, buf, opts);
  }

  release(): void {
    this.held = false;
    for (const r of this.#open.splice(0)) r();
  }
}

const dev = new SlowDevice({ size: 4 << 20 });
const att = await attachFuse(dev, process.argv[2]!);
process.stdout.write(`ready ${att.path}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'hold') {
    dev.held = true;
    process.stdout.write('held\n');
  } else if (line === 'release') {
    dev.release();
  } else if (line === 'exit') {
    break;
  }
}
dev.release();
await att.close();
process.exit(0);
