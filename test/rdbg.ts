import { randomUUID, randomBytes } from 'node:crypto';
import { FileBackend } from '../target/backend/file.js';
import { LogicalUnit } from '../target/scsi/index.js';
import { TargetServer } from '../target/server.js';
import { rblkConnections, type RblkConnection } from '../target/session/connection.js';
import { FabricTargetTransport } from '../target/transport/fabric-transport.js';
import { Reactors } from '../native/reactors.js';
import { connect } from '../initiator/index.js';
import { memoryLog, TARGET_NAME, testServerOptions } from './helpers/target-fixture.js';

const log = memoryLog();
const pool = process.env.R === '0' ? null : Reactors.start(2);
const server = new TargetServer({ ...testServerOptions(log, { fastPath: true }), reactors: pool }, rblkConnections);
const be = await FileBackend.open({ path: '/tmp/rdbg/vol', size: 1 << 20 });
server.addVolume({ name: 'vol0', lun: 0, lu: new LogicalUnit({ name: 'vol0', backend: be, identifier: randomUUID() }), access: () => 'rw' });
const port = (await server.listen({ transport: new FabricTargetTransport(), provider: 'tcp', address: '127.0.0.1', port: 0 })).port;
console.log('listening', port);
const s = await connect(`rblk://127.0.0.1:${port}/vol0?provider=tcp`, { targetName: TARGET_NAME });
console.log('connected');
const v = await s.open();
console.log('opened');
for (let i = 0; i < 20; i++) {
  const d = randomBytes(4096);
  await v.write(i * 4096, d);
  const b = await v.read(i * 4096, 4096);
  if (!b.equals(d)) console.log('MISMATCH', i);
}
console.log('io done', [...server.sessions].map((x) => (x as RblkConnection).fastPathStats), pool?.stats);
await s.close();
await server.close();
pool?.close();
await be.close();
console.log('closed', log.lines.filter((l) => l.level !== 'debug').map((l) => l.message));
