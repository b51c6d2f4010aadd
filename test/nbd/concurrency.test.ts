// Concurrency and lifecycle: out-of-order replies, the in-flight bounds,
// disconnects, graceful close, and a misbehaving client that must not
// disturb anyone else.
import test from 'ava';
import { connect } from 'node:net';
import { serve, until } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';
import { CMD, RawClient, type Reply } from './helpers/raw-client.js';

const MiB = 1024 * 1024;

/** Lets the server run for a while (event-loop turns, not a timing assertion). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

test('replies come back out of order, matched by cookie', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  device.load(0, Buffer.alloc(512, 0x11));
  const { address } = await serve(t, device);
  const client = await RawClient.open(address, '', { structured: true });
  t.teardown(() => client.destroy());
  const release = device.hold('read');
  const readCookie = client.send({ type: CMD.READ, offset: 0, length: 512 });
  const writeCookie = client.send({ type: CMD.WRITE, offset: 4096, data: Buffer.alloc(512, 0x22) });
  const first = await client.readReply();
  t.is(first.cookie, writeCookie);
  t.is(first.error, 0);
  release();
  const second = await client.readReply();
  t.is(second.cookie, readCookie);
  t.true(second.data.equals(Buffer.alloc(512, 0x11)));
});

test('at most 64 requests per connection are in flight; the rest wait and are all answered', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address } = await serve(t, device);
  const client = await RawClient.open(address, '');
  t.teardown(() => client.destroy());
  const release = device.hold();
  const sent = new Set<bigint>();
  for (let i = 0; i < 100; i++) sent.add(client.send({ type: CMD.READ, offset: (i % 16) * 4096, length: 4096 }));
  await until(() => device.active === 64, '64 requests on the device');
  await settle();
  t.is(device.active, 64);
  t.is(device.calls.length, 64, 'request 65 is not even read from the socket yet');
  release();
  const answered = new Set<bigint>();
  for (let i = 0; i < 100; i++) {
    const reply = await client.readReply();
    t.is(reply.error, 0);
    t.is(reply.data.length, 4096);
    answered.add(reply.cookie);
  }
  t.deepEqual([...answered].sort(), [...sent].sort());
  t.is(device.maxActive, 64);
});

test('maxInFlight is configurable', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address } = await serve(t, device, { maxInFlight: 3 });
  const client = await RawClient.open(address, '');
  t.teardown(() => client.destroy());
  const release = device.hold();
  for (let i = 0; i < 10; i++) client.send({ type: CMD.FLUSH });
  await until(() => device.active === 3, '3 requests on the device');
  await settle();
  t.is(device.calls.length, 3);
  release();
  for (let i = 0; i < 10; i++) t.is((await client.readReply()).error, 0);
  t.is(device.maxActive, 3);
});

test('payload bytes in flight are bounded too: a third 24 MiB read waits', async (t) => {
  const device = new MemoryDevice({ size: 96 * MiB, maxTransfer: 32 * MiB });
  device.load(48 * MiB, Buffer.alloc(24 * MiB, 0x33));
  const { address } = await serve(t, device);
  const client = await RawClient.open(address, '', { structured: true });
  t.teardown(() => client.destroy());
  const release = device.hold();
  for (let i = 0; i < 3; i++) client.send({ type: CMD.READ, offset: i * 24 * MiB, length: 24 * MiB });
  await until(() => device.active === 2, 'two reads on the device');
  await settle();
  t.is(device.calls.length, 2, 'a third would pin 72 MiB, over the 64 MiB bound');
  release();
  const replies: Reply[] = [];
  for (let i = 0; i < 3; i++) replies.push(await client.readReply());
  t.true(replies.every((r) => r.error === 0 && r.data.length === 24 * MiB));
  t.true(replies.find((r) => r.dataOffset === BigInt(48 * MiB))?.data.equals(Buffer.alloc(24 * MiB, 0x33)));
});

test('NBD_CMD_DISC: outstanding requests are answered, then the server closes', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address, server } = await serve(t, device);
  const client = await RawClient.open(address, '');
  const release = device.hold();
  const cookie = client.send({ type: CMD.WRITE, offset: 0, data: Buffer.alloc(4096, 0x44) });
  client.send({ type: CMD.DISC });
  await until(() => device.active === 1, 'the write on the device');
  release();
  const reply = await client.readReply();
  t.is(reply.cookie, cookie);
  t.is(reply.error, 0);
  await client.closed;
  t.true(client.atEof);
  t.true(device.contents().subarray(0, 4096).equals(Buffer.alloc(4096, 0x44)));
  await until(() => server.connections === 0, 'the connection to be gone');
});

test('a client that shuts down its sending side still gets its replies', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address } = await serve(t, device);
  const client = await RawClient.open(address, '');
  const cookie = client.send({ type: CMD.WRITE, offset: 8192, data: Buffer.alloc(512, 0x55) });
  client.socket.end();
  const reply = await client.readReply();
  t.is(reply.cookie, cookie);
  t.is(reply.error, 0);
  await client.closed;
  t.true(device.contents().subarray(8192, 8704).equals(Buffer.alloc(512, 0x55)));
});

test('close() stops accepting, lets in-flight requests finish and be answered, then closes', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  device.load(0, Buffer.alloc(4096, 0x66));
  const { address, server } = await serve(t, device);
  const client = await RawClient.open(address, '', { structured: true });
  const negotiating = await RawClient.connect(address);
  await negotiating.greeting();
  await until(() => server.connections === 2, 'two connections');
  const release = device.hold();
  const cookie = client.send({ type: CMD.READ, offset: 0, length: 4096 });
  await until(() => device.active === 1, 'the read on the device');

  let closed = false;
  const closing = server.close().then(() => {
    closed = true;
  });
  await negotiating.closed;
  t.true(negotiating.atEof, 'a client still negotiating is dropped');
  await settle();
  t.false(closed, 'close() waits for the request on the device');
  const refused = await new Promise<boolean>((resolve) => {
    const probe = connect({ host: '127.0.0.1', port: address.port ?? 0 });
    probe.once('error', () => resolve(true));
    probe.once('connect', () => {
      probe.destroy();
      resolve(false);
    });
  });
  t.true(refused, 'no new connections once closing');

  release();
  const reply = await client.readReply();
  t.is(reply.cookie, cookie);
  t.true(reply.data.equals(Buffer.alloc(4096, 0x66)));
  await closing;
  await client.closed;
  t.is(server.connections, 0);
});

test('a bad request magic closes only that connection', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address, server, logs } = await serve(t, device);
  const bad = await RawClient.open(address, '');
  const good = await RawClient.open(address, '');
  t.teardown(() => good.destroy());
  t.is((await good.write(0, Buffer.alloc(512, 0x77))).error, 0);
  bad.socket.write(Buffer.alloc(28, 0xff));
  await bad.closed;
  t.true(bad.atEof);
  t.true(logs.some((l) => l.level === 'warn' && l.msg.endsWith('closing the connection: bad request magic 0xffffffff')));
  await until(() => server.connections === 1, 'one connection left');
  const read = await good.read(0, 512);
  t.is(read.error, 0);
  t.true(read.data.equals(Buffer.alloc(512, 0x77)));
});

test('a client that vanishes with requests on the device does not disturb the server', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address, server } = await serve(t, device);
  const gone = await RawClient.open(address, '');
  const release = device.hold();
  for (let i = 0; i < 8; i++) gone.send({ type: CMD.READ, offset: 0, length: 65536 });
  await until(() => device.active === 8, 'eight reads on the device');
  gone.destroy();
  await settle();
  release();
  await until(() => server.connections === 0, 'the vanished connection to be cleaned up');
  const other = await RawClient.open(address, '');
  t.teardown(() => other.destroy());
  t.is((await other.read(0, 512)).error, 0);
});

test('connections to one export share the device: a write on one is read on another', async (t) => {
  const device = new MemoryDevice({ size: MiB });
  const { address } = await serve(t, device);
  const a = await RawClient.open(address, '');
  const b = await RawClient.open(address, '', { structured: true });
  t.teardown(() => {
    a.destroy();
    b.destroy();
  });
  t.is((await a.write(65536, Buffer.alloc(4096, 0x88))).error, 0);
  t.is((await b.request({ type: CMD.FLUSH })).error, 0);
  t.true((await b.read(65536, 4096)).data.equals(Buffer.alloc(4096, 0x88)));
});
