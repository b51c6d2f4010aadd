import test from 'ava';
import { FabricError } from '../../native/fabric.js';
import { connectPair, PROVIDERS, sendsInOrder, until } from '../helpers/fabric-pair.js';

const COUNT = 10_000;
const POSTED = 64;

for (const provider of PROVIDERS) {
  test.serial(`${provider}: ${COUNT} sends arrive in order with their contents intact`, (t) => sendsInOrder(t, provider, COUNT, POSTED));

  test.serial(`${provider}: sendInline (fi_inject) delivers small messages and refuses oversized ones`, async (t) => {
    const got: string[] = [];
    const pair = await connectPair(provider, {
      serverPrepare: (ep) => {
        const mr = ep.domain.register(4096);
        ep.onReceive = (s, n) => got.push(s.buffer.subarray(0, n).toString());
        for (let i = 0; i < 4; i++) ep.postReceive(mr.slice(i * 1024, 1024));
      },
    });
    t.teardown(() => pair.close());
    pair.clientEp.sendInline(Buffer.from('one'));
    pair.clientEp.sendInline(Buffer.from('two'));
    await until(() => got.length === 2, 'inline messages');
    t.deepEqual(got, ['one', 'two']);
    const big = Buffer.alloc(pair.clientEp.info.injectSize + 1);
    const err = t.throws(() => pair.clientEp.sendInline(big), { instanceOf: FabricError });
    t.is(err?.code, 'FI_EMSGSIZE');
  });
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: busy polling delivers the same messages, then goes idle`, async (t) => {
    let got = 0;
    const pair = await connectPair(provider, {
      serverPrepare: (ep) => {
        ep.busyPollMicros = 100;
        const mr = ep.domain.register(4096);
        ep.onReceive = (slice, length) => {
          // Echo back through fi_inject and repost.
          ep.sendInline(slice.buffer.subarray(0, length));
          ep.postReceive(slice);
        };
        ep.postReceive(mr.slice(0, 4096));
      },
    });
    t.teardown(() => pair.close());
    pair.clientEp.busyPollMicros = 100;
    t.is(pair.clientEp.busyPollMicros, 100);
    t.throws(() => (pair.clientEp.busyPollMicros = -1), { instanceOf: RangeError });
    const mr = pair.client.register(4096);
    const echoes: number[] = [];
    await new Promise<void>((resolve) => {
      pair.clientEp.onReceive = (slice) => {
        echoes.push(slice.buffer.readUInt32BE(0));
        pair.clientEp.postReceive(slice);
        if (++got === 2000) return resolve();
        const b = Buffer.alloc(8);
        b.writeUInt32BE(got, 0);
        pair.clientEp.sendInline(b);
      };
      pair.clientEp.postReceive(mr.slice(0, 4096));
      pair.clientEp.sendInline(Buffer.alloc(8));
    });
    t.deepEqual(echoes, Array.from({ length: 2000 }, (_, i) => i));
    // Once the last echo is in, nothing is pending: neither side wakes or spins again. Counting
    // wake-ups, not CPU time, holds on a loaded machine too (docs/architecture.md "The test kit").
    await new Promise((r) => setTimeout(r, 50));
    const before = [pair.clientEp.wakeups, pair.serverEp.wakeups];
    t.true(before[0].spins > 0 && before[1].spins > 0, `both sides spun while busy: ${JSON.stringify(before)}`);
    const start = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 500));
    const used = process.cpuUsage(start);
    t.log(`${provider}: ${((used.user + used.system) / 1000).toFixed(1)} ms CPU in 0.5 s idle after busy polling`);
    t.deepEqual([pair.clientEp.wakeups, pair.serverEp.wakeups], before, 'no wake-up or spin while idle');
  });
}
