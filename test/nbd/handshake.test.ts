// Fixed newstyle negotiation, checked byte by byte with the raw test client.
import test from 'ava';
import { existsSync } from 'node:fs';
import { NbdServer } from '../../initiator/nbd/index.js';
import { serve, until } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';
import {
  CMD,
  FLAG,
  IHAVEOPT,
  INFO,
  NBDMAGIC,
  OPT,
  REP,
  RawClient,
  infoItems,
  infoRequest,
} from './helpers/raw-client.js';

const MiB = 1024 * 1024;

function twoExports(): Map<string, MemoryDevice> {
  return new Map([
    ['disk', new MemoryDevice({ size: 4 * MiB })],
    ['ro', new MemoryDevice({ size: 2 * MiB, readOnly: true })],
  ]);
}

async function greeted(port: number | undefined, flags = 3): Promise<RawClient> {
  const client = await RawClient.connect({ port });
  await client.greeting();
  client.sendClientFlags(flags);
  return client;
}

test('greeting is NBDMAGIC, IHAVEOPT and FIXED_NEWSTYLE|NO_ZEROES', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await RawClient.connect(address);
  const hello = await client.greeting();
  t.is(hello.magic, NBDMAGIC);
  t.is(hello.optMagic, IHAVEOPT);
  t.is(hello.flags, 3);
  client.destroy();
});

test('unknown client flags close the connection with a logged reason', async (t) => {
  const { address, logs } = await serve(t, twoExports());
  const client = await greeted(address.port, 0x7);
  await client.closed;
  t.true(client.atEof);
  t.true(logs.some((l) => l.level === 'warn' && l.msg.endsWith('client flags 0x7 include unknown bits 0x4')));
});

test('NBD_OPT_LIST names every export, and rejects data', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await greeted(address.port);
  const replies = await client.option(OPT.LIST);
  t.deepEqual(
    replies.map((r) => r.type),
    [REP.SERVER, REP.SERVER, REP.ACK],
  );
  const names = replies.slice(0, 2).map((r) => r.data.subarray(4, 4 + r.data.readUInt32BE(0)).toString());
  t.deepEqual(names, ['disk', 'ro']);
  t.true(replies.every((r) => r.option === OPT.LIST));

  const bad = await client.option(OPT.LIST, Buffer.from('x'));
  t.is(bad.length, 1);
  t.is(bad[0]?.type, REP.ERR_INVALID);
  t.is(bad[0]?.data.toString(), 'NBD_OPT_LIST takes no data');
  client.destroy();
});

test('NBD_OPT_INFO gives size, flags, block sizes and the canonical name of the default export', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await greeted(address.port);
  const replies = await client.option(OPT.INFO, infoRequest('', [INFO.NAME, INFO.BLOCK_SIZE]));
  t.is(replies.at(-1)?.type, REP.ACK);
  const items = infoItems(replies);
  const exp = items.get(INFO.EXPORT);
  t.is(exp?.length, 10);
  t.is(exp?.readBigUInt64BE(0), BigInt(4 * MiB));
  t.is(
    exp?.readUInt16BE(8),
    FLAG.HAS_FLAGS |
      FLAG.SEND_FLUSH |
      FLAG.SEND_FUA |
      FLAG.SEND_TRIM |
      FLAG.SEND_WRITE_ZEROES |
      FLAG.CAN_MULTI_CONN |
      FLAG.SEND_CACHE |
      FLAG.SEND_FAST_ZERO,
  );
  const sizes = items.get(INFO.BLOCK_SIZE);
  t.deepEqual([sizes?.readUInt32BE(0), sizes?.readUInt32BE(4), sizes?.readUInt32BE(8)], [512, 4096, MiB]);
  t.is(items.get(INFO.NAME)?.toString(), 'disk');

  // INFO leaves the client in negotiation: a second option still gets answered.
  const again = await client.option(OPT.INFO, infoRequest('ro'));
  const roFlags = infoItems(again).get(INFO.EXPORT)?.readUInt16BE(8) ?? 0;
  t.is(roFlags, FLAG.HAS_FLAGS | FLAG.READ_ONLY | FLAG.SEND_FLUSH | FLAG.CAN_MULTI_CONN | FLAG.SEND_CACHE);
  t.false(infoItems(again).has(INFO.NAME), 'INFO_NAME only when asked for');
  client.destroy();
});

test('block sizes follow the device: 4096-byte blocks, max payload capped at 32 MiB or maxTransfer', async (t) => {
  const exports = new Map([
    ['big', new MemoryDevice({ size: 64 * MiB, blockSize: 4096, maxTransfer: 64 * MiB })],
    ['small', new MemoryDevice({ size: MiB, blockSize: 512, maxTransfer: 2048, canDiscard: false })],
  ]);
  const { address } = await serve(t, exports);
  const client = await greeted(address.port);
  const sizes = async (name: string): Promise<number[]> => {
    const b = infoItems(await client.option(OPT.INFO, infoRequest(name))).get(INFO.BLOCK_SIZE);
    return [b?.readUInt32BE(0) ?? 0, b?.readUInt32BE(4) ?? 0, b?.readUInt32BE(8) ?? 0];
  };
  t.deepEqual(await sizes('big'), [4096, 4096, 32 * MiB]);
  t.deepEqual(await sizes('small'), [512, 2048, 2048]);
  const flags = infoItems(await client.option(OPT.INFO, infoRequest('small'))).get(INFO.EXPORT)?.readUInt16BE(8) ?? 0;
  t.is(flags & FLAG.SEND_TRIM, 0, 'no TRIM when the device cannot discard');
  t.not(flags & FLAG.SEND_WRITE_ZEROES, 0);
  client.destroy();
});

test('an unknown export name gets NBD_REP_ERR_UNKNOWN and negotiation goes on', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await greeted(address.port);
  const replies = await client.option(OPT.GO, infoRequest('nope'));
  t.is(replies.length, 1);
  t.is(replies[0]?.type, REP.ERR_UNKNOWN);
  t.is(replies[0]?.data.toString(), 'no export named "nope"');
  const go = await client.option(OPT.GO, infoRequest('ro'));
  t.is(go.at(-1)?.type, REP.ACK);
  const reply = await client.read(0, 512);
  t.is(reply.error, 0);
  t.is(reply.data.length, 512);
  client.destroy();
});

test('unsupported options get NBD_REP_ERR_UNSUP, malformed and oversized ones ERR_INVALID and ERR_TOO_BIG', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await greeted(address.port);
  for (const option of [42, OPT.STARTTLS]) {
    const [reply] = await client.option(option);
    t.is(reply?.type, REP.ERR_UNSUP, `option ${option}`);
    t.is(reply?.option, option);
  }
  // Metadata-context options are supported (docs/nbd.md); without their data they are malformed.
  for (const option of [OPT.LIST_META, OPT.SET_META]) {
    const [reply] = await client.option(option);
    t.is(reply?.type, REP.ERR_INVALID, `option ${option}`);
  }
  // Name length 100 in 8 bytes of data.
  const bad = Buffer.alloc(8);
  bad.writeUInt32BE(100, 0);
  const [invalid] = await client.option(OPT.GO, bad);
  t.is(invalid?.type, REP.ERR_INVALID);
  t.is(invalid?.data.toString(), 'name length 100 overruns option data of 8 bytes');
  // Info request count that does not match the data length.
  const miscount = infoRequest('disk', [INFO.NAME]);
  const [counted] = await client.option(OPT.INFO, miscount.subarray(0, miscount.length - 1));
  t.is(counted?.type, REP.ERR_INVALID);

  const [tooBig] = await client.option(OPT.INFO, Buffer.alloc(40000));
  t.is(tooBig?.type, REP.ERR_TOO_BIG);
  // The 40000 bytes were skipped, so the stream is still in step.
  const list = await client.option(OPT.LIST);
  t.is(list.at(-1)?.type, REP.ACK);
  client.destroy();
});

test('NBD_OPT_STRUCTURED_REPLY is acknowledged and adds SEND_DF; data makes it invalid', async (t) => {
  const { address } = await serve(t, twoExports());
  const client = await greeted(address.port);
  const flagsOf = async (): Promise<number> =>
    infoItems(await client.option(OPT.INFO, infoRequest('disk'))).get(INFO.EXPORT)?.readUInt16BE(8) ?? 0;
  t.is((await flagsOf()) & FLAG.SEND_DF, 0);
  const [bad] = await client.option(OPT.STRUCTURED_REPLY, Buffer.from([1]));
  t.is(bad?.type, REP.ERR_INVALID);
  const [ack] = await client.option(OPT.STRUCTURED_REPLY);
  t.is(ack?.type, REP.ACK);
  t.is((await flagsOf()) & FLAG.SEND_DF, FLAG.SEND_DF);
  client.destroy();
});

test('NBD_OPT_ABORT is acknowledged, then the server closes', async (t) => {
  const { address, server } = await serve(t, twoExports());
  const client = await greeted(address.port);
  const [ack] = await client.option(OPT.ABORT);
  t.is(ack?.type, REP.ACK);
  await client.closed;
  t.true(client.atEof);
  await until(() => server.connections === 0, 'the server to drop the connection');
  t.is(server.connections, 0);
});

test('NBD_OPT_EXPORT_NAME: size and flags, 124 zeroes unless NO_ZEROES, then transmission', async (t) => {
  const device = new MemoryDevice({ size: 4 * MiB });
  device.load(4096, Buffer.alloc(512, 0x5a));
  const { address } = await serve(t, new Map([['disk', device]]));

  const withZeroes = await greeted(address.port, 1);
  withZeroes.sendOption(OPT.EXPORT_NAME, Buffer.from('disk'));
  const answer = await withZeroes.readBytes(10 + 124);
  t.is(answer.readBigUInt64BE(0), BigInt(4 * MiB));
  t.is(answer.readUInt16BE(8) & (FLAG.HAS_FLAGS | FLAG.SEND_DF), FLAG.HAS_FLAGS);
  t.true(answer.subarray(10).equals(Buffer.alloc(124)));
  const read = await withZeroes.read(4096, 512);
  t.is(read.error, 0);
  t.true(read.data.equals(Buffer.alloc(512, 0x5a)));
  withZeroes.destroy();

  const noZeroes = await greeted(address.port, 3);
  noZeroes.sendOption(OPT.EXPORT_NAME, Buffer.alloc(0));
  const short = await noZeroes.readBytes(10);
  t.is(short.readBigUInt64BE(0), BigInt(4 * MiB), 'the empty name is the default export');
  // No zeroes: the very next bytes are the reply to this read.
  const again = await noZeroes.read(4096, 512);
  t.true(again.data.equals(Buffer.alloc(512, 0x5a)));
  noZeroes.destroy();
});

test('NBD_OPT_EXPORT_NAME for an unknown export ends the session without a reply', async (t) => {
  const { address, logs } = await serve(t, twoExports());
  const client = await greeted(address.port);
  client.sendOption(OPT.EXPORT_NAME, Buffer.from('missing'));
  await client.closed;
  t.true(client.atEof);
  t.true(logs.some((l) => l.level === 'warn' && l.msg.includes('unknown export "missing"')));
});

test('a bad option magic closes the connection', async (t) => {
  const { address, logs } = await serve(t, twoExports());
  const client = await greeted(address.port);
  client.socket.write(Buffer.alloc(16, 0xee));
  await client.closed;
  t.true(logs.some((l) => l.level === 'warn' && l.msg.endsWith('bad option magic 0xeeeeeeeeeeeeeeee')));
});

test('an export literally named "" is the default', async (t) => {
  const exports = new Map([
    ['first', new MemoryDevice({ size: MiB })],
    ['', new MemoryDevice({ size: 2 * MiB })],
  ]);
  const { address } = await serve(t, exports);
  const client = await greeted(address.port);
  const size = infoItems(await client.option(OPT.INFO, infoRequest(''))).get(INFO.EXPORT)?.readBigUInt64BE(0);
  t.is(size, BigInt(2 * MiB));
  client.destroy();
});

test('a lone device is exported under opts.name, and "" reaches it too', async (t) => {
  const { address } = await serve(t, new MemoryDevice({ size: MiB }), { name: 'vol0' });
  const client = await greeted(address.port);
  const list = await client.option(OPT.LIST);
  t.is(list[0]?.data.subarray(4).toString(), 'vol0');
  const items = infoItems(await client.option(OPT.GO, infoRequest('', [INFO.NAME])));
  t.is(items.get(INFO.NAME)?.toString(), 'vol0');
  const reply = await client.request({ type: CMD.FLUSH });
  t.is(reply.error, 0);
  client.destroy();
});

test('the constructor rejects devices the protocol cannot describe', (t) => {
  t.throws(() => new NbdServer(new Map()), { message: 'NbdServer needs at least one export' });
  t.throws(() => new NbdServer(new MemoryDevice({ size: MiB, blockSize: 1000 })), {
    message: 'NBD export "": block size 1000 must be a power of two from 512 to 65536',
  });
  t.throws(() => new NbdServer(new MemoryDevice({ size: MiB + 512, blockSize: 4096 }), { name: 'x' }), {
    message: 'NBD export "x": size 1049088 must be a whole number of 4096-byte blocks',
  });
  t.throws(() => new NbdServer(new MemoryDevice({ size: MiB, maxTransfer: 256 })), {
    message: 'NBD export "": max transfer 256 must be at least one block (512)',
  });
});

test('a unix socket serves the same protocol and is removed on close', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address, server } = await serve(t, device, { unix: true });
  const path = address.path ?? '';
  t.true(existsSync(path));
  const client = await RawClient.open(address, '');
  const data = Buffer.alloc(4096, 0x42);
  t.is((await client.write(8192, data)).error, 0);
  t.true((await client.read(8192, 4096)).data.equals(data));
  await client.disconnect();
  await server.close();
  t.false(existsSync(path));
});
