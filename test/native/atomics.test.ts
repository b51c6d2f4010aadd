import test from 'ava';
import { FabricError } from '../../native/fabric.js';
import { connectPair } from '../helpers/fabric-pair.js';

test.serial('sockets: 1,000 concurrent fetch-adds sum exactly', async (t) => {
  const pair = await connectPair('sockets');
  t.teardown(() => pair.close());
  t.true(pair.server.hasAtomics);
  const counter = pair.client.register(4096, { remote: true });
  counter.buffer.writeBigUInt64LE(1000n, 8);
  const target = counter.remote(8, 8);
  const olds = await Promise.all(Array.from({ length: 1000 }, (_, i) => pair.serverEp.fetchAdd(target, BigInt(i + 1))));
  t.is(counter.buffer.readBigUInt64LE(8), 1000n + 500_500n, 'sum of 1..1000 added exactly once each');
  // Each fetch saw a distinct previous value: no add was lost or doubled.
  t.is(new Set(olds.map(String)).size, 1000);
  t.is(counter.buffer.readBigUInt64LE(0), 0n, 'neighbouring bytes untouched');
  t.is(counter.buffer.readBigUInt64LE(16), 0n, 'neighbouring bytes untouched');
});

test.serial('sockets: compare-and-swap swaps only on a match', async (t) => {
  const pair = await connectPair('sockets');
  t.teardown(() => pair.close());
  const cell = pair.client.register(4096, { remote: true });
  cell.buffer.writeBigUInt64LE(7n, 0);
  const where = cell.remote(0, 8);
  t.is(await pair.serverEp.compareSwap(where, 5n, 9n), 7n);
  t.is(cell.buffer.readBigUInt64LE(0), 7n, 'no swap on mismatch');
  t.is(await pair.serverEp.compareSwap(where, 7n, 9n), 7n);
  t.is(cell.buffer.readBigUInt64LE(0), 9n, 'swapped on match');
  // 200 racing lock attempts on one cell: exactly one wins.
  cell.buffer.writeBigUInt64LE(0n, 16);
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => pair.serverEp.compareSwap(cell.remote(16, 8), 0n, BigInt(i + 1))));
  t.is(results.filter((r) => r === 0n).length, 1);
});

test.serial('tcp: atomics fail with a clear FI_EOPNOTSUPP', async (t) => {
  const pair = await connectPair('tcp');
  t.teardown(() => pair.close());
  t.false(pair.server.hasAtomics);
  const cell = pair.client.register(4096, { remote: true });
  const err = await t.throwsAsync(pair.serverEp.fetchAdd(cell.remote(0, 8), 1n), { instanceOf: FabricError });
  t.is(err?.code, 'FI_EOPNOTSUPP');
  t.is(err?.op, 'fi_fetch_atomic');
  t.regex(err?.message ?? '', /not supported by the tcp provider/);
  const err2 = await t.throwsAsync(pair.serverEp.compareSwap(cell.remote(0, 8), 0n, 1n), { instanceOf: FabricError });
  t.is(err2?.code, 'FI_EOPNOTSUPP');
});
