// The export's reusable I/O memory (initiator/nbd/io-buffers.ts) against a
// device that offers readInto(), as an rblk Volume does: bytes still
// round-trip, memory is reused rather than allocated per request, and a short
// read is never passed on as a reply. (What a lost rblk connection does to
// that path is in connection-loss.test.ts.)
import test, { type ExecutionContext } from 'ava';
import { serve } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';
import { E, RawClient } from './helpers/raw-client.js';
import { until } from '../../bench/kit/wait.js';

const MiB = 1024 * 1024;

/** A MemoryDevice that reads into the caller's memory and notes which memory it was given. */
class IntoDevice extends MemoryDevice {
  readonly memory = new Set<ArrayBufferLike>();

  async readInto(offset: number, into: Buffer): Promise<void> {
    this.memory.add(into.buffer);
    const data = await this.read(offset, into.length);
    data.copy(into);
  }

  override async write(offset: number, buf: Buffer, opts?: { fua?: boolean }): Promise<void> {
    this.memory.add(buf.buffer);
    await super.write(offset, buf, opts);
  }
}

function fill(length: number, seed: number): Buffer {
  const buf = Buffer.alloc(length);
  for (let i = 0; i < length; i++) buf[i] = (i * 13 + seed * 101 + (i >> 10)) & 0xff;
  return buf;
}

/** Writes and reads of two sizes, one at a time, 40 times over, each read compared. */
async function writeAndReadBack(t: ExecutionContext, client: RawClient): Promise<void> {
  for (let i = 0; i < 40; i++) {
    const size = i % 2 === 0 ? 128 * 1024 : 4096;
    const at = (i * 131072) % (6 * MiB);
    const data = fill(size, i);
    t.is((await client.write(at, data)).error, 0);
    const back = await client.read(at, size);
    t.is(back.error, 0);
    t.true(back.data.equals(data), `request ${i} read back other bytes`);
  }
}

test('the export reuses its own memory across requests', async (t) => {
  const device = new IntoDevice({ size: 8 * MiB });
  const { address } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured: true });
  t.teardown(() => client.destroy());

  await writeAndReadBack(t, client);
  t.true(device.memory.size <= 4, `${device.memory.size} buffers used for 80 requests one at a time: they are not being reused`);
});

test('a device read that comes back short is an EIO, never a short reply', async (t) => {
  class ShortDevice extends MemoryDevice {
    override async read(offset: number, length: number): Promise<Buffer> {
      return (await super.read(offset, length)).subarray(0, length - 512);
    }
  }
  const device = new ShortDevice({ size: 8 * MiB });
  const { address, logs } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured: true });
  t.teardown(() => client.destroy());
  const reply = await client.read(0, 4096);
  t.is(reply.error, E.EIO);
  t.true(
    logs.some((l) => l.level === 'error' && l.msg.includes('the device returned 3584 bytes for a 4096-byte')),
    logs.map((l) => `${l.level}: ${l.msg}`).join('\n'),
  );
  // The connection is still in step: the next request is answered.
  t.is((await client.write(0, fill(4096, 1))).error, 0);
});

/** An IntoDevice that lends its own memory (BlockDevice.allocate), as an rblk Volume lends session.allocate()'s. */
class LendingDevice extends IntoDevice {
  lent = 0;
  returned = 0;
  readonly lentMemory = new Set<ArrayBufferLike>();
  failAllocate = false;

  allocate(length: number): { buffer: Buffer; release(): void } {
    if (this.failAllocate) throw new Error('no memory to lend');
    const buffer = Buffer.alloc(length);
    this.lent++;
    this.lentMemory.add(buffer.buffer);
    let released = false;
    return {
      buffer,
      release: () => {
        if (released) throw new Error('released twice');
        released = true;
        this.returned++;
      },
    };
  }
}

test("the export's buffers are the device's lent memory, reused, and all given back when the client leaves", async (t) => {
  const device = new LendingDevice({ size: 8 * MiB });
  const { address } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured: true });
  await writeAndReadBack(t, client);
  // Every read and write was given the device's memory: zero-copy on an rblk volume.
  t.true([...device.memory].every((m) => device.lentMemory.has(m)), 'the device saw memory it had not lent');
  t.true(device.lent >= 1 && device.lent <= 4, `${device.lent} buffers lent for 80 requests one at a time`);
  client.destroy();
  await until(() => device.returned === device.lent, 'the lent memory given back');
  t.is(device.returned, device.lent);
});

test('when the device has no memory to lend, the export uses its own and goes on', async (t) => {
  const device = new LendingDevice({ size: 8 * MiB });
  device.failAllocate = true;
  const { address } = await serve(t, new Map([['disk', device]]));
  const client = await RawClient.open(address, 'disk', { structured: true });
  t.teardown(() => client.destroy());
  const data = fill(8192, 7);
  t.is((await client.write(4096, data)).error, 0);
  t.true((await client.read(4096, 8192)).data.equals(data));
  t.is(device.lent, 0);
});
