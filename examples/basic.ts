// Connects to an rblk target, lists its volumes, writes a block to one of
// them, reads it back and prints what happened. The block written is the
// volume's last 4 KiB; its old contents are put back afterwards.
//
//   npx tsx examples/basic.ts 'rblk://127.0.0.1/vol0?provider=tcp'
//
// The secret, if the target wants one, comes from RBLK_SECRET (never the URL).
import { randomBytes } from 'node:crypto';
import { connect, RblkError } from '../initiator/index.js';

async function main(url: string): Promise<void> {
  const session = await connect(url);
  session.on('state', (state, previous) => console.log(`session: ${previous} -> ${state}`));
  try {
    console.log(`connected to ${session.options.targetName} at ${session.options.address}:${session.options.port}`);
    for (const c of session.connections) console.log(`  connection ${c.index}: session id ${c.sessionId}, provider ${c.provider}`);

    const volumes = await session.volumes();
    console.log('volumes:');
    for (const v of volumes) {
      const flags = [v.readOnly ? 'read-only' : 'read-write', v.thin ? 'thin' : 'thick'].join(', ');
      console.log(`  LUN ${v.lun}  ${v.name}  ${v.size} bytes  ${v.blockSize}-byte blocks  ${flags}  ${v.id}`);
    }

    const volume = await session.open();
    if (volume.readOnly) {
      console.log(`${volume.name} is read-only; nothing to write`);
      return;
    }
    const length = Math.max(4096, volume.blockSize);
    const offset = volume.size - length;
    const saved = await volume.read(offset, length);
    const data = randomBytes(length);
    await volume.write(offset, data, { fua: true });
    const back = await volume.read(offset, length);
    console.log(`wrote ${length} bytes at ${offset} of ${volume.name} and read back ${back.equals(data) ? 'the same bytes' : 'DIFFERENT bytes'}`);
    await volume.write(offset, saved);
    await volume.flush();
    console.log('restored the original contents');
  } finally {
    await session.close();
  }
}

const url = process.argv[2];
if (url === undefined) {
  console.error('usage: tsx examples/basic.ts rblk://host[:port]/volume[?provider=tcp]');
  process.exit(2);
}
main(url).catch((e: unknown) => {
  console.error(e instanceof RblkError ? `${e.code}: ${e.message}` : e);
  process.exit(1);
});
