import test from 'ava';
import { FabricError, Pool } from '../../native/fabric.js';
import { connectPair, pattern, PROVIDERS } from '../helpers/fabric-pair.js';

const SIZES = [1, 7, 512, 4096, 65_537, 1 << 20, 4 << 20];

for (const provider of PROVIDERS) {
  test.serial(`${provider}: RMA write then read back, 1 byte to 4 MiB, data compared`, async (t) => {
    const pair = await connectPair(provider);
    t.teardown(() => pair.close());
    // The initiator's memory is remote-accessible; the target's is local only.
    const remote = pair.client.register(4 << 20, { remote: true });
    const local = pair.server.register(4 << 20);
    for (const size of SIZES) {
      const data = pattern(size, size);
      data.copy(local.buffer, 0);
      // Delivery-complete: the bytes are placed in the peer's memory when this resolves.
      await pair.serverEp.write(local.slice(0, size), remote.remote(0, size), { deliveryComplete: true });
      t.true(remote.buffer.subarray(0, size).equals(data), `write of ${size} landed`);
      local.buffer.fill(0, 0, size);
      await pair.serverEp.read(local.slice(0, size), remote.remote(0, size));
      t.true(local.buffer.subarray(0, size).equals(data), `read of ${size} came back`);
    }
  });

  test.serial(`${provider}: RMA with iov lists scatters and gathers in order`, async (t) => {
    const pair = await connectPair(provider);
    t.teardown(() => pair.close());
    const remote = pair.client.register(1 << 20, { remote: true });
    const local = pair.server.register(1 << 20);
    const limit = Math.min(4, pair.serverEp.info.iovLimit, pair.serverEp.info.rmaIovLimit);
    t.true(limit >= 2, 'provider takes iov lists');
    const src = pattern(limit * 3000, 99);
    src.copy(remote.buffer, 0);
    // Gather: one remote range into `limit` local pieces at scattered offsets.
    const pieces = Array.from({ length: limit }, (_, i) => local.slice(i * 100_000 + 13, 3000));
    await pair.serverEp.read(pieces, remote.remote(0, limit * 3000));
    t.true(Buffer.concat(pieces.map((p) => p.buffer)).equals(src), 'gathered read');
    // Scatter: local pieces to `limit` remote ranges in reverse order.
    const remotes = Array.from({ length: limit }, (_, i) => remote.remote(500_000 + (limit - 1 - i) * 4096, 3000));
    await pair.serverEp.write(pieces, remotes, { deliveryComplete: true });
    for (let i = 0; i < limit; i++) {
      const at = 500_000 + (limit - 1 - i) * 4096;
      t.true(remote.buffer.subarray(at, at + 3000).equals(src.subarray(i * 3000, (i + 1) * 3000)), `piece ${i}`);
    }
    // Mismatched totals and too many entries are refused before anything is posted.
    await t.throwsAsync(pair.serverEp.read([local.slice(0, 10)], remote.remote(0, 11)), { message: /differs from remote length/ });
    const many = Array.from({ length: pair.serverEp.info.iovLimit + 1 }, (_, i) => local.slice(i * 8, 8));
    await t.throwsAsync(pair.serverEp.read(many, remote.remote(0, many.length * 8)), { message: /local iov count/ });
  });

  test.serial(`${provider}: a wrong key or an access past the region fails that operation`, async (t) => {
    const pair = await connectPair(provider);
    t.teardown(() => pair.close());
    const remote = pair.client.register(64 * 1024, { remote: true });
    const localOnly = pair.client.register(4096);
    const local = pair.server.register(64 * 1024);
    remote.buffer.write('intact', 0);
    const wrongKey = await t.throwsAsync(pair.serverEp.read(local.slice(0, 16), { address: remote.remoteBase, key: remote.key + 1000n, length: 16 }), {
      instanceOf: FabricError,
    });
    t.is(wrongKey?.op, 'fi_readmsg');
    if (provider === 'sockets') {
      // sockets checks the key at the peer, answers FI_EACCES and keeps the connection.
      t.is(wrongKey?.code, 'FI_EACCES');
      const past = await t.throwsAsync(pair.serverEp.read(local.slice(0, 16), remote.remote(64 * 1024 - 8, 16)), { instanceOf: FabricError });
      t.is(past?.code, 'FI_EACCES');
      const notRemote = await t.throwsAsync(pair.serverEp.write(local.slice(0, 16), localOnly.remote(0, 16)), { instanceOf: FabricError });
      t.is(notRemote?.code, 'FI_EACCES', 'memory registered local-only refuses remote writes');
      await pair.serverEp.read(local.slice(0, 6), remote.remote(0, 6));
      t.is(local.buffer.subarray(0, 6).toString(), 'intact', 'the connection still works');
    } else {
      // tcp, like an RC queue pair on verbs, treats a protection error as fatal
      // to the connection: the operation fails and the endpoint shuts down.
      t.true(['FI_ECANCELED', 'FI_EACCES', 'FI_EIO'].includes(wrongKey?.code ?? ''), wrongKey?.code);
      await new Promise<void>((resolve) => (pair.serverEp.isClosed ? resolve() : pair.serverEp.once('close', () => resolve())));
      t.true(pair.serverEp.isClosed);
      const after = await t.throwsAsync(pair.serverEp.read(local.slice(0, 6), remote.remote(0, 6)));
      t.is((after as FabricError).code, 'ERR_CLOSED');
    }
    t.is(remote.buffer.subarray(0, 6).toString(), 'intact', 'nothing was written through a bad descriptor');
  });

  test.serial(`${provider}: misuse throws or rejects cleanly`, async (t) => {
    const pair = await connectPair(provider);
    const remote = pair.client.register(4096, { remote: true });
    const local = pair.server.register(4096);
    t.throws(() => local.slice(4000, 100), { instanceOf: RangeError });
    // A slice forged past the region is caught natively too.
    const forged = { mr: local, offset: 4000, length: 200, buffer: Buffer.alloc(0) };
    const e1 = await t.throwsAsync(pair.serverEp.read(forged, remote.remote(0, 200)));
    t.is((e1 as FabricError).code, 'ERR_OUT_OF_RANGE');
    await local.close();
    t.is(local.buffer.length, 0, 'views read as empty after close');
    t.throws(() => local.slice(0, 1), { message: /closed/ });
    await local.close(); // a second close is a no-op
    const e2 = await t.throwsAsync(pair.serverEp.read({ mr: local, offset: 0, length: 1, buffer: Buffer.alloc(0) }, remote.remote(0, 1)));
    t.is((e2 as FabricError).code, 'ERR_CLOSED');
    const stale = remote.slice(0, 1);
    await pair.close();
    await pair.close(); // double close of everything is harmless
    const e3 = await t.throwsAsync(pair.serverEp.send(stale));
    t.is((e3 as FabricError).code, 'ERR_CLOSED');
    t.throws(() => pair.server.register(4096), { message: /domain is closed/ });
  });
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: an RMA write is visible before a send posted after it (FI_ORDER_SAW)`, async (t) => {
    const ROUNDS = 300;
    const SIZE = 64 * 1024;
    let mismatches = 0;
    let seen = 0;
    let remoteMem: Buffer | undefined;
    const pair = await connectPair(provider, {
      clientPrepare: (ep) => {
        const mr = ep.domain.register(16 * 64);
        ep.onReceive = (slice) => {
          // The response names the round; the data for that round must already be here.
          const round = slice.buffer.readUInt32BE(0);
          if (!remoteMem || remoteMem.readUInt32BE(0) !== round || remoteMem.readUInt32BE(SIZE - 4) !== round) mismatches++;
          seen++;
          ep.postReceive(slice);
        };
        for (let i = 0; i < 16; i++) ep.postReceive(mr.slice(i * 64, 64));
      },
    });
    t.teardown(() => pair.close());
    t.true(pair.server.ordersSendAfterWrite, `${provider} offers FI_ORDER_SAW`);
    const remote = pair.client.register(SIZE, { remote: true });
    remoteMem = remote.buffer;
    const data = pair.server.register(SIZE + 64);
    for (let round = 1; round <= ROUNDS; round++) {
      data.buffer.writeUInt32BE(round, 0);
      data.buffer.writeUInt32BE(round, SIZE - 4);
      data.buffer.writeUInt32BE(round, SIZE);
      // Post the write and the send back to back, as the target does for a READ.
      const w = pair.serverEp.write(data.slice(0, SIZE), remote.remote(0, SIZE));
      const s = pair.serverEp.send(data.slice(SIZE, 4));
      await Promise.all([w, s]);
      for (let i = 0; i < 10_000 && seen < round; i++) await new Promise((r) => setImmediate(r));
    }
    t.is(seen, ROUNDS);
    t.is(mismatches, 0);
  });
}

test.serial('closing a region with posted receives is refused until their endpoint closes', async (t) => {
  const pair = await connectPair('tcp');
  t.teardown(() => pair.close());
  const mr = pair.server.register(4096);
  pair.serverEp.postReceive(mr.slice(0, 1024));
  const err = await t.throwsAsync(mr.close());
  t.is((err as FabricError).code, 'ERR_BUSY');
  t.regex(err?.message ?? '', /1 receive\(s\) are still posted/);
  t.is(mr.buffer.length, 4096, 'the region is still usable');
  await pair.serverEp.close();
  await mr.close();
  t.is(mr.buffer.length, 0);
});

test.serial('a pool rejects waiters and new acquires once it is closed', async (t) => {
  const pair = await connectPair('tcp');
  t.teardown(() => pair.close());
  const pool = new Pool(pair.server, { chunkSize: 4096, count: 1 });
  const held = await pool.acquire();
  t.is(held.length, 4096);
  const waiting = pool.acquire();
  await pool.close();
  const e1 = await t.throwsAsync(waiting);
  t.is((e1 as FabricError).code, 'ERR_CLOSED');
  const e2 = await t.throwsAsync(pool.acquire());
  t.is((e2 as FabricError).code, 'ERR_CLOSED');
});
