// The far side of the "rblk session" rows: a TargetServer over the fabric
// transport with the backing file as LUN 0, in its own process (its own
// event loop, as rblkd would be), without the daemon's config and logging.
//   node rblk-target.js PROVIDER FILE LBA_SIZE TARGET_NAME
// Prints {"port":N} once listening; exits when its stdin closes.
import { randomUUID } from 'node:crypto';
import { openBackend } from '../../target/backend/open.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import type { TargetLogger } from '../../target/connection/environment.js';
import { FabricTargetTransport } from '../../target/transport/fabric-transport.js';

async function main(): Promise<void> {
  const [provider, path, lba, targetName] = process.argv.slice(2);
  if (targetName === undefined) throw new Error('usage: rblk-target PROVIDER FILE LBA_SIZE TARGET_NAME');
  const blockSize = Number(lba);
  if (blockSize !== 512 && blockSize !== 4096) throw new Error(`LBA size ${lba} must be 512 or 4096`);
  const quiet = (): void => undefined;
  const loud = (message: string): void => void process.stderr.write(`rblk-target: ${message}\n`);
  const log: TargetLogger = { error: loud, warn: loud, info: quiet, debug: quiet };
  // O_DIRECT, as every server in this bench (see peers.ts on the page cache).
  const backend = await openBackend({ path, direct: true, logicalBlockSize: blockSize });
  const lu = new LogicalUnit({ name: 'bench', backend, identifier: randomUUID(), blockSize });
  const server = new TargetServer({
    targetName,
    limits: {
      queueDepth: 128,
      maxIo: 1 << 20,
      inCapsuleData: 8192,
      maxDescriptors: 16,
      keepAliveMs: 0,
      loginTimeoutMs: 10_000,
      maxSessions: 8,
      dataBuffers: 32,
    },
    authRequired: false,
    secrets: new Map(),
    log,
  }, rblkConnections);
  server.addVolume({ name: 'bench', lun: 0, lu, access: () => 'rw' });
  const port = await server.listen({ transport: new FabricTargetTransport(), provider, address: '127.0.0.1', port: 0 });
  process.stdout.write(JSON.stringify({ port: port.port }) + '\n');
  process.stdin.resume();
  process.stdin.on('end', () => {
    (async () => {
      await server.close();
      await backend.close();
      process.exit(0);
    })().catch((e: unknown) => {
      process.stderr.write(`rblk-target: closing failed: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    });
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`rblk-target: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
