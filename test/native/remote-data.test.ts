// fi_writedata on the providers here (docs/transport.md "Remote CQ data"):
// the data is in place when the peer's CQ reports the 32 bits, no posted
// receive is consumed, and receives and remote data keep their order.
import test from 'ava';
import { connectPair, PROVIDERS, until } from '../helpers/fabric-pair.js';

for (const provider of PROVIDERS) {
  test.serial(`${provider}: a write with remote data lands before its data is reported, and takes no receive`, async (t) => {
    const ROUNDS = 200;
    const SIZE = 4096;
    const events: string[] = [];
    let mismatches = 0;
    let remoteMem: Buffer | undefined;
    let consumed = 0;
    const pair = await connectPair(provider, {
      clientPrepare: (ep) => {
        const mr = ep.domain.register(4 * 64);
        ep.onReceive = (slice) => {
          events.push(`msg ${slice.buffer.readUInt32BE(0)}`);
          ep.postReceive(slice);
        };
        ep.onRemoteData = (data, slice) => {
          if (slice !== null) {
            consumed++;
            ep.postReceive(slice);
          }
          // The data of that round must be in place already.
          if (remoteMem?.readUInt32BE(0) !== data || remoteMem.readUInt32BE(SIZE - 4) !== data) mismatches++;
          events.push(`data ${data}`);
        };
        for (let i = 0; i < 4; i++) ep.postReceive(mr.slice(i * 64, 64));
      },
    });
    t.teardown(() => pair.close());
    t.true(pair.server.hasRemoteData, `${provider} offers remote CQ data (cq_data_size ${pair.server.info.cqDataSize})`);
    t.false(pair.server.info.rxCqData, `${provider} does not consume receives for remote CQ data`);
    const remote = pair.client.register(SIZE, { remote: true });
    remoteMem = remote.buffer;
    const local = pair.server.register(SIZE + 64);
    for (let round = 1; round <= ROUNDS; round++) {
      local.buffer.writeUInt32BE(round, 0);
      local.buffer.writeUInt32BE(round, SIZE - 4);
      local.buffer.writeUInt32BE(round, SIZE);
      // Alternate: odd rounds a write with data, even rounds a write then a message.
      if (round % 2 === 1) await pair.serverEp.write(local.slice(0, SIZE), remote.remote(0, SIZE), { remoteData: round });
      else await Promise.all([pair.serverEp.write(local.slice(0, SIZE), remote.remote(0, SIZE)), pair.serverEp.send(local.slice(SIZE, 4))]);
      await until(() => events.length === round, `round ${round} reported`);
    }
    t.is(mismatches, 0);
    t.is(consumed, 0);
    t.deepEqual(events, Array.from({ length: ROUNDS }, (_, i) => (i % 2 === 0 ? `data ${i + 1}` : `msg ${i + 1}`)));
    // The 4 receives were never taken by remote data: 4 messages in a row still land.
    for (let i = 0; i < 4; i++) local.buffer.writeUInt32BE(1000 + i, SIZE);
    await Promise.all([0, 1, 2, 3].map(() => pair.serverEp.send(local.slice(SIZE, 4))));
    await until(() => events.length === ROUNDS + 4, 'four messages');
    t.is(events.length, ROUNDS + 4);
    // The largest value round-trips; out of range is refused before posting.
    await pair.serverEp.write(local.slice(0, 8), remote.remote(0, 8), { remoteData: 0xffffffff });
    await until(() => events.length === ROUNDS + 5, 'max data');
    t.is(events.at(-1), `data ${0xffffffff}`);
    await t.throwsAsync(pair.serverEp.write(local.slice(0, 8), remote.remote(0, 8), { remoteData: 2 ** 32 }), { instanceOf: RangeError });
  });
}
