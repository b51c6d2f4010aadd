// An initiator in a process of its own that keeps 32 READs and WRITEs in
// flight on volume `vol` until it is killed (rbd-fast-path.test.ts kills it
// with librbd I/O of the target's fast path in flight).
// Usage: rbd-io-peer.ts PORT TARGET_NAME. Prints "busy" once its first commands are sent.
import { connect } from '../../../initiator/index.js';

const port = Number(process.argv[2]);
const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:killed', targetName: process.argv[3], busyRetries: 0 });
const v = await s.open('vol');
const data = Buffer.alloc(4096, 0x5a);
let said = false;
for (let round = 0; round < 1_000_000; round++) {
  const ops: Promise<unknown>[] = [];
  for (let i = 0; i < 32; i++) {
    const at = ((round * 32 + i) % 512) * 4096;
    ops.push((i % 2 === 0 ? v.write(at, data) : v.read(at, 4096)).catch(() => undefined));
  }
  if (!said) {
    said = true;
    process.stdout.write('busy\n');
  }
  await Promise.all(ops);
}
