// The export's reusable I/O memory (initiator/nbd/io-buffers.ts) against a
// device that offers allocate() and readInto(), as an rblk Volume does with
// registered memory: bytes still round-trip, memory is reused rather than
// allocated per request, memory whose connection was lost is replaced and the
// request still succeeds, and everything allocated is released at the end.
import test from 'ava';
import type { DeviceBuffer } from '../../initiator/block-device.js';
import { serve } from './helpers/harness.js';
import { blockError, MemoryDevice } from './helpers/memory-device.js';
import { RawClient } from './helpers/raw-client.js';

const MiB = 1024 * 1024;

class Tracked implements DeviceBuffer {
  released = false;
  lost = false;
  constructor(readonly buffer: Buffer) {}
  get valid(): boolean {
    return !this.released && !this.lost;
  }
  release(): void {
    this.released = true;
  }
}

/** A MemoryDevice with device memory: reads into one of its buffers fail with CONNECTION_LOST once that buffer is lost. */
class RegisteringDevice extends MemoryDevice {
  readonly handedOut: Tracked[] = [];
  readonly #mine = new WeakMap<ArrayBufferLike, Tracked>();

  allocate(length: number): DeviceBuffer {
    const b = new Tracked(Buffer.alloc(length));
    this.handedOut.push(b);
    this.#mine.set(b.buffer.buffer, b);
    return b;
  }

  #check(buf: Buffer): void {
    const owner = this.#mine.get(buf.buffer);
    if (owner !== undefined && !owner.valid) throw blockError('CONNECTION_LOST', 'the registered buffer is no longer valid');
  }

  async readInto(offset: number, into: Buffer): Promise<void> {
    const data = await this.read(offset, into.length);
    // Checked after the I/O, so a loss while it runs fails it, as on a real connection.
    this.#check(into);
    data.copy(into);
  }

  override async write(offset: number, buf: Buffer, opts?: { fua?: boolean }): Promise<void> {
    this.#check(buf);
    await super.write(offset, buf, opts);
  }

  loseConnection(): void {
    for (const b of this.handedOut) b.lost = true;
  }
}

function fill(length: number, seed: number): Buffer {
  const buf = Buffer.alloc(length);
  for (let i = 0; i < length; i++) buf[i] = (i * 13 + seed * 101 + (i >> 10)) & 0xff;
  return buf;
}

test('device memory is reused across requests, survives a lost connection, and is all released at the end', async (t) => {
  const device = new RegisteringDevice({ size: 8 * MiB });
  const { address } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured: true });
  t.teardown(() => client.destroy());

  // Writes and reads of two sizes, one at a time, many times over.
  for (let i = 0; i < 40; i++) {
    const size = i % 2 === 0 ? 128 * 1024 : 4096;
    const at = (i * 131072) % (6 * MiB);
    const data = fill(size, i);
    t.is((await client.write(at, data)).error, 0);
    const back = await client.read(at, size);
    t.is(back.error, 0);
    t.true(back.data.equals(data), `request ${i} read back other bytes`);
  }
  const before = device.handedOut.length;
  t.true(before <= 4, `${before} buffers allocated for 80 requests one at a time: they are not being reused`);

  // The connection behind the memory goes away: the next requests still succeed.
  device.loseConnection();
  for (const size of [128 * 1024, 4096]) {
    const data = fill(size, size);
    t.is((await client.write(MiB, data)).error, 0);
    const back = await client.read(MiB, data.length);
    t.is(back.error, 0);
    t.true(back.data.equals(data), `${size}-byte request after the loss`);
  }
  t.true(device.handedOut.slice(0, before).every((b) => b.released), 'lost buffers are released, not reused');
  t.true(device.handedOut.length > before, 'new memory replaced the lost');

  // The connection dies while a read is running in device memory: the export
  // reads again through device.read(), and the client never sees it.
  const at = 7 * MiB;
  device.load(at, fill(128 * 1024, 7));
  const release = device.hold('read');
  const pending = client.read(at, 128 * 1024);
  for (let i = 0; i < 500 && device.active === 0; i++) await new Promise((r) => setTimeout(r, 2));
  device.loseConnection();
  release();
  const late = await pending;
  t.is(late.error, 0);
  t.true(late.data.equals(fill(128 * 1024, 7)));
  const reads = device.calls.filter((c) => c.op === 'read' && c.offset === at);
  t.is(reads.length, 2, 'the lost read was done again');

  // When the client goes, every buffer the export allocated is released.
  await client.disconnect();
  for (let i = 0; i < 200 && !device.handedOut.every((b) => b.released); i++) await new Promise((r) => setTimeout(r, 10));
  t.deepEqual(
    device.handedOut.filter((b) => !b.released).length,
    0,
    'buffers left unreleased after the client disconnected',
  );
});
