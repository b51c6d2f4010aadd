// Protocol version negotiation (docs/protocol.md §3) and version 2's read
// completion by remote CQ data (§12.1), end to end over tcp and sockets: a
// GOOD read is answered by its data write alone, a failed one still by an
// RSP with its sense, and version-1 peers on either side keep working.
import test from 'ava';
import { Connection, type LoginOptions } from '../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import type { ConnectOptions, InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from '../../initiator/transport/transport.js';
import { Domain, FabricError } from '../../native/fabric.js';
import { read, testUnitReady, write } from '../../protocol/scsi/cdb.js';
import { connectDataBuffer, ConnectKind, ConnectRejectReason, decodeCapsule, decodeConnectData, Opcode, PROTOCOL_VERSION } from '../../protocol/wire/index.js';
import { PROVIDERS } from '../helpers/fabric-pair.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { INITIATOR, pattern, startServer, TARGET_NAME, type TestTarget } from './helpers/target.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

/** Counts what the target answers with: RSP capsules and remote CQ data. */
class Counting implements InitiatorTransport {
  readonly name = 'fabric' as const;
  rsp = 0;
  remoteData = 0;
  readonly versionsAsked: number[] = [];
  readonly #inner = new FabricInitiatorTransport();

  memory(size: number): SessionMemory {
    return this.#inner.memory(size);
  }

  async connect(opts: ConnectOptions): Promise<InitiatorConnection> {
    const inner = await this.#inner.connect(opts);
    const outer: InitiatorConnection = {
      provider: inner.provider,
      accept: inner.accept,
      version: inner.version,
      onCapsule: null,
      onClose: null,
      onRemoteData: null,
      send: (c: Buffer) => inner.send(c),
      allocate: (n: number): Promise<IoBuffer> => inner.allocate(n),
      register: (m: SessionMemory): IoBuffer => inner.register(m),
      close: () => inner.close(),
    };
    inner.onCapsule = (c) => {
      if (decodeCapsule(Buffer.from(c), { from: 'target' }).op === Opcode.RSP) this.rsp++;
      outer.onCapsule?.(c);
    };
    inner.onRemoteData = (d) => {
      this.remoteData++;
      outer.onRemoteData?.(d);
    };
    inner.onClose = (r) => outer.onClose?.(r);
    return outer;
  }
}

function login(target: TestTarget, provider: string, extra: Partial<LoginOptions> = {}): LoginOptions {
  return { address: target.address, port: target.port, provider, initiatorName: INITIATOR, targetName: TARGET_NAME, ...extra };
}

const BLOCKS = 8; // 4 KiB of 512-byte blocks
const READS = 20;

/** Writes a pattern, reads it back READS times at QD4 and once past the end; returns what came back. */
async function exercise(t: import('ava').ExecutionContext, conn: Connection): Promise<void> {
  // The first command after login reports the unit attention of the power-on (29/00).
  await conn.command({ lun: 0, cdb: testUnitReady() });
  const data = pattern(BLOCKS * 512, 3);
  const out = await conn.allocate(data.length);
  data.copy(out.buffer);
  const w = await conn.command({ lun: 0, cdb: write(0, BLOCKS), dataOut: out });
  out.release();
  t.is(w.status, 0);
  for (let i = 0; i < READS; i += 4) {
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        const into = await conn.allocate(data.length);
        try {
          const r = await conn.command({ lun: 0, cdb: read(0, BLOCKS), dataIn: into });
          t.is(r.status, 0);
          t.is(r.dataIn, data.length);
          t.true(into.buffer.equals(data), 'the bytes read back');
        } finally {
          into.release();
        }
      }),
    );
  }
  // Past the end of the 4 MiB volume: CHECK CONDITION, ILLEGAL REQUEST, LBA OUT OF RANGE (05/21/00), by RSP.
  const into = await conn.allocate(512);
  try {
    const bad = await conn.command({ lun: 0, cdb: read(8192, 1), dataIn: into });
    t.is(bad.status, 2);
    t.is(bad.sense[2] & 0x0f, 0x05);
    t.is(bad.sense[12], 0x21);
  } finally {
    into.release();
  }
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: version 2 and later answer GOOD reads by remote CQ data and failures by RSP`, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0 }]);
    const transport = new Counting();
    const conn = await Connection.open(transport, login(target, provider));
    t.teardown(async () => {
      await conn.logout();
      await target.close();
    });
    t.is(conn.version, PROTOCOL_VERSION, 'the highest both speak');
    await exercise(t, conn);
    t.is(transport.remoteData, READS, 'every GOOD read came back as remote data');
    t.is(transport.rsp, 3, 'RSPs only for TEST UNIT READY, the write and the failed read');
  });

  test.serial(`${provider}: a version-1 initiator logs in to a version-2 target and gets an RSP for every read`, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0 }]);
    const transport = new Counting();
    const conn = await Connection.open(transport, login(target, provider, { protocolVersion: 1 }));
    t.teardown(async () => {
      await conn.logout();
      await target.close();
    });
    t.is(conn.version, 1);
    await exercise(t, conn);
    t.is(transport.remoteData, 0);
    t.is(transport.rsp, READS + 3);
  });

  test.serial(`${provider}: against a version-1 target the initiator falls back to version 1`, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0 }], { protocolVersion: 1 });
    const transport = new Counting();
    const conn = await Connection.open(transport, login(target, provider));
    t.teardown(async () => {
      await conn.logout();
      await target.close();
    });
    t.is(conn.version, 1);
    await exercise(t, conn);
    t.is(transport.remoteData, 0);
    t.is(transport.rsp, READS + 3);
  });
}

test.serial('tcp: a CONNECT above the versions the target speaks gets REJECT reason 1 naming the highest', async (t) => {
  for (const [speaks, asked] of [
    [PROTOCOL_VERSION, PROTOCOL_VERSION + 1],
    [1, 2],
  ] as const) {
    const target = await startServer('tcp', [{ name: 'vol0', lun: 0 }], { protocolVersion: speaks });
    const domain = Domain.open({ provider: 'tcp', address: '127.0.0.1' });
    t.teardown(async () => {
      await domain.close();
      await target.close();
    });
    const pd = connectDataBuffer({ kind: ConnectKind.CONNECT, maxCapsule: 1024, queueDepth: 1 });
    pd[4] = asked; // a version this code would not encode
    const e = await t.throwsAsync(domain.connect({ address: '127.0.0.1', port: target.port, privateData: pd }), { instanceOf: FabricError });
    t.is(e?.code, 'FI_ECONNREFUSED');
    const rej = decodeConnectData((e as FabricError & { privateData: Buffer }).privateData, ConnectKind.REJECT);
    t.deepEqual(rej, { kind: ConnectKind.REJECT, version: speaks, reason: ConnectRejectReason.UNSUPPORTED_VERSION });
  }
});
