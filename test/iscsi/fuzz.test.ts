// Malformed input never stops the portal (docs/iscsi.md "Protocol errors"):
// connections that send random bytes, or well-framed PDUs with random
// opcodes, flags and fields, before and after login, each end alone; a
// session opened first keeps working, and every fd comes back.
import test from 'ava';
import { resources } from '../helpers/resources.js';
import { INITIATOR, IQN, startIscsi } from './portal-fixture.js';
import { loginStatus, RawInitiator } from './raw-initiator.js';

/** xorshift32: the same sequence every run, so a failure can be replayed. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const OPCODES = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x1c, 0x3f];

test('random PDUs and bytes end only their own connections', async (t) => {
  const f = await startIscsi([{ name: 'vol0', lun: 0, size: 1 << 20 }], { maxSessions: 64 });
  t.teardown(() => f.close());
  const before = resources().fds;
  const keeper = await RawInitiator.open(f.port);
  t.is(loginStatus((await keeper.login({ initiator: INITIATOR, target: IQN }))!), 0);

  const rnd = prng(0x15c51);
  for (let round = 0; round < 120; round++) {
    const c = await RawInitiator.open(f.port);
    if (round % 3 !== 0) await c.login({ initiator: `${INITIATOR}-${round}`, target: IQN });
    if (round % 5 === 0) {
      c.socket.write(Buffer.from(Array.from({ length: 1 + (rnd() % 300) }, () => rnd() & 0xff)));
    } else {
      for (let i = 0; i < 8 && !c.closed; i++) {
        const h = Buffer.alloc(48);
        for (let b = 0; b < 48; b++) h[b] = rnd() & 0xff;
        h[0] = (h[0] & 0x40) | OPCODES[rnd() % OPCODES.length];
        h[4] = rnd() % 3; // a small AHS now and then
        const data = Buffer.alloc(rnd() % 1100, rnd() & 0xff);
        c.send(h, data);
        if (h[4] > 0) c.socket.write(Buffer.alloc(h[4] * 4));
      }
    }
    await Promise.race([c.whenClosed, new Promise((r) => setTimeout(r, 20))]);
    c.close();
  }

  keeper.command({ itt: 1, cdb: Buffer.alloc(16), edtl: 0 });
  t.truthy(await keeper.next(0x21), 'the first session still answers');
  keeper.close();
  for (let i = 0; i < 200 && (f.server.sessions.size > 0 || resources().fds > before); i++) await new Promise((r) => setTimeout(r, 20));
  t.is(f.server.sessions.size, 0);
  t.true(resources().fds <= before, `fds ${resources().fds} > ${before}`);
  t.false(f.log.some((l) => l.level === 'error'), f.log.filter((l) => l.level === 'error').map((l) => l.message).join('\n'));
});
