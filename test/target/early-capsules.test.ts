// The initiator may send its first capsule (the login) as soon as its side of
// the connection is up, and that receive can complete on the target before the
// target has read FI_CONNECTED from its event queue, so before the session
// layer has taken the connection. Those capsules must wait, in order, not be
// dropped (the sockets provider dropped about one login in twenty that way).
// Here the target side takes its time on purpose: onReceive and onCapsule are
// set only after the initiator has sent.
import test from 'ava';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectPair, pattern, PROVIDERS, until } from '../helpers/fabric-pair.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { FabricTargetTransport } from '../../target/transport/fabric-transport.js';
import type { TargetConnection } from '../../target/transport/transport.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MESSAGES = 3;

for (const provider of PROVIDERS) {
  test.serial(`${provider}: receives that complete before onReceive is set are delivered in order once it is`, async (t) => {
    let recvRegion: ReturnType<(typeof pair)['server']['register']> | null = null;
    const pair = await connectPair(provider, {
      serverPrepare: (ep) => {
        recvRegion = ep.domain.register(4 * 4096);
        for (let i = 0; i < 4; i++) ep.postReceive(recvRegion.slice(i * 4096, 4096));
      },
    });
    t.teardown(() => pair.close());
    const pool = new (await import('../../native/fabric.js')).Pool(pair.client, { chunkSize: 4096, count: 4 });
    t.teardown(() => pool.close());
    for (let i = 0; i < MESSAGES; i++) await pair.clientEp.sendCopy(pattern(1000 + i, i + 1), pool);
    // Let the receives complete (and the CQ be drained) with no handler set.
    await sleep(200);
    const got: Buffer[] = [];
    pair.serverEp.onReceive = (slice, length) => got.push(Buffer.from(slice.buffer.subarray(0, length)));
    await until(() => got.length === MESSAGES, 'the early messages');
    for (let i = 0; i < MESSAGES; i++) t.true(got[i].equals(pattern(1000 + i, i + 1)), `message ${i}`);
    t.truthy(recvRegion);
  });

  test.serial(`${provider}: capsules sent before the session layer takes the connection reach it, in order`, async (t) => {
    let taken: TargetConnection | null = null;
    const port = await new FabricTargetTransport().listen(
      { provider, address: '127.0.0.1', port: 0, maxIo: 1 << 20, dataBuffers: 4 },
      {
        admit: () => ({ accept: { recvBuffers: 8, maxCapsule: 1024 } }),
        connected: (conn) => {
          taken = conn;
        },
      },
    );
    t.teardown(() => port.close());
    const conn = await new FabricInitiatorTransport().connect({
      address: '127.0.0.1',
      port: port.port,
      provider,
      maxCapsule: 1024,
      queueDepth: 4,
      receiveSize: 1024,
      ioPoolSize: 1 << 20,
      ioChunkSize: 1 << 20,
    });
    t.teardown(() => conn.close());
    for (let i = 0; i < MESSAGES; i++) await conn.send(pattern(100 + i, i + 7));
    await until(() => taken !== null, 'the accepted connection');
    await sleep(200);
    const got: Buffer[] = [];
    taken!.onCapsule = (b) => got.push(Buffer.from(b));
    await until(() => got.length === MESSAGES, 'the early capsules');
    for (let i = 0; i < MESSAGES; i++) t.true(got[i].equals(pattern(100 + i, i + 7)), `capsule ${i}`);
    // The held buffers were posted again: more capsules than were held still arrive.
    for (let i = 0; i < 10; i++) await conn.send(pattern(64, 50 + i));
    await until(() => got.length === MESSAGES + 10, 'the later capsules');
    t.true(got[MESSAGES + 9].equals(pattern(64, 59)));
  });
}
