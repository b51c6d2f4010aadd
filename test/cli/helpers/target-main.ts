// A TargetServer in its own process, for the CLI tests: the CLI runs as a
// child process too and must reach the target over a real fabric (tcp on
// 127.0.0.1), as it would reach rblkd. The spec comes as JSON in argv[2]; the
// port is printed as `listening PORT` once the target accepts logins.
import { randomUUID } from 'node:crypto';
import type { Backend } from '../../../target/backend/backend.js';
import { FileBackend } from '../../../target/backend/file.js';
import { MemoryBackend } from '../../../target/backend/memory.js';
import { LogicalUnit } from '../../../target/scsi/index.js';
import { TargetServer } from '../../../target/server.js';
import { rblkConnections } from '../../../target/rblk/connection.js';
import { FabricTargetTransport } from '../../../target/transport/fabric-transport.js';
import { DEFAULT_TARGET_NAME } from '../../../protocol/wire/index.js';
import { memoryLog } from '../../helpers/target-fixture.js';
import type { TargetSpec } from './target-process.js';

async function main(spec: TargetSpec): Promise<void> {
  const server = new TargetServer({
    targetName: spec.targetName ?? DEFAULT_TARGET_NAME,
    limits: {
      queueDepth: 64,
      maxIo: 1 << 20,
      inCapsuleData: 8192,
      maxDescriptors: 16,
      keepAliveMs: 0,
      loginTimeoutMs: 10_000,
      maxSessions: 64,
      dataBuffers: 64,
    },
    authRequired: spec.authRequired ?? false,
    secrets: new Map(Object.entries(spec.secrets ?? {})),
    log: memoryLog(),
  }, rblkConnections);
  const backends: Backend[] = [];
  for (const v of spec.volumes) {
    const backend: Backend =
      v.file !== undefined ? await FileBackend.open({ path: v.file, size: v.size }) : new MemoryBackend({ size: v.size, name: v.name });
    backends.push(backend);
    const lu = new LogicalUnit({ name: v.name, backend, identifier: randomUUID(), blockSize: v.blockSize ?? 512, readOnly: v.readOnly });
    server.addVolume({ name: v.name, lun: v.lun, lu, access: () => 'rw' });
  }
  const port = await server.listen({ transport: new FabricTargetTransport(), provider: spec.provider, address: '127.0.0.1', port: 0 });
  process.stdout.write(`listening ${port.port}\n`);
  const stop = (): void => {
    void (async () => {
      await server.close();
      for (const b of backends) await b.close();
      process.exit(0);
    })().catch((e: unknown) => {
      process.stderr.write(`target-main: closing failed: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main(JSON.parse(process.argv[2] ?? '{}') as TargetSpec).catch((e: unknown) => {
  process.stderr.write(`target-main: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
