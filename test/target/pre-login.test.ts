// Connections that never log in (docs/operations.md, "Connection limits"):
// raw TCP connections that never send a fabric connection request are shut
// down within login_timeout_ms, and fabric connections that connect but do not
// log in count against pre_login_connections, beyond which more are refused,
// while sessions that do log in keep working.
import test, { type ExecutionContext } from 'ava';
import { readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import type { Connection } from '../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { pattern, PROVIDERS } from '../helpers/fabric-pair.js';
import { startTarget } from '../helpers/target-fixture.js';
import { halfRequest } from '../../bench/soak/half-request.js';
import { until as eventually } from '../../bench/kit/wait.js';

const LOGIN_TIMEOUT_MS = 1500;
const SILENT = 8;
const GARBAGE = 3;

function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

async function roundTrip(t: ExecutionContext, c: Connection, seed: number): Promise<void> {
  const data = pattern(4096, seed);
  const out = await c.allocate(4096);
  data.copy(out.buffer);
  // The first command of a session may meet the power-on unit attention (SPC-5 5.14): retry it once.
  let w = await c.command({ lun: 0, cdb: cdb.write10(seed, 8), dataOut: out });
  if (w.status === ScsiStatus.CHECK_CONDITION) w = await c.command({ lun: 0, cdb: cdb.write10(seed, 8), dataOut: out });
  out.release();
  t.is(w.status, ScsiStatus.GOOD, 'write');
  const into = await c.allocate(4096);
  into.buffer.fill(0);
  const r = await c.command({ lun: 0, cdb: cdb.read10(seed, 8), dataIn: into });
  t.is(r.status, ScsiStatus.GOOD, 'read');
  t.true(into.buffer.equals(data), 'the bytes written are read back');
  into.release();
}

function rawConnection(port: number, garbage: Buffer | null): Promise<Socket & { ended: boolean }> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port }) as Socket & { ended: boolean };
    s.ended = false;
    s.on('close', () => (s.ended = true));
    s.on('error', () => (s.ended = true));
    s.once('connect', () => {
      if (garbage) s.write(garbage);
      resolve(s);
    });
    s.once('error', reject);
  });
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: TCP connections that send no connection request are closed within login_timeout_ms`, async (t) => {
    const f = await startTarget(provider, undefined, { loginTimeoutMs: LOGIN_TIMEOUT_MS });
    t.teardown(() => f.close());
    const healthy = await f.connect();
    await roundTrip(t, healthy, 1);
    const before = openFds();

    const raw: (Socket & { ended: boolean })[] = [];
    t.teardown(() => raw.forEach((s) => s.destroy()));
    for (let i = 0; i < SILENT; i++) raw.push(await rawConnection(f.port, null));
    // Bytes no provider takes for a CM header: the provider may drop these at once, or hold them.
    for (let i = 0; i < GARBAGE; i++) raw.push(await rawConnection(f.port, Buffer.alloc(3 + i * 40, 0x5a + i)));

    // The healthy session is served while they wait.
    await roundTrip(t, healthy, 2);
    await eventually(() => raw.every((s) => s.ended), 'the target to close every raw connection');
    raw.forEach((s) => s.destroy());
    // The target's sockets (and the test's own) are gone, not merely shut down.
    await eventually(() => openFds() <= before, `open fds to come back to ${before} (now ${openFds()})`);
    t.true(
      f.log.some((l) => /sent no connection request/.test(l.message)),
      'the target logs what it closed',
    );
    // A new session still logs in, and the first one still works.
    const later = await f.connect();
    await roundTrip(t, later, 3);
    await roundTrip(t, healthy, 4);
  });

  // The first bytes of a connection request that announce more and then stop
  // (docs/transport.md, "Half-sent connection requests"): the provider reads
  // the rest with a blocking recv, which once stopped the whole target.
  test.serial(`${provider}: a connection request that stops half-way stops neither the sessions nor new logins`, async (t) => {
    const f = await startTarget(provider, undefined, { loginTimeoutMs: LOGIN_TIMEOUT_MS });
    t.teardown(() => f.close());
    const healthy = await f.connect();
    await roundTrip(t, healthy, 6);

    const raw = await rawConnection(f.port, halfRequest(provider));
    t.teardown(() => raw.destroy());
    // The target's thread is not held: the session is served while the request hangs.
    await roundTrip(t, healthy, 7);
    // New logins: on tcp at once (the provider's read gives up); the sockets
    // provider's CM thread is held until the target shuts the socket down,
    // so there a login may be refused until then, and no longer.
    let refused = 0;
    let later: Connection | null = null;
    const deadline = Date.now() + LOGIN_TIMEOUT_MS * 4;
    while (later === null) {
      try {
        later = await f.connect();
      } catch (e) {
        if (provider === 'tcp' || Date.now() > deadline) throw e;
        refused++;
        await sleep(100);
      }
    }
    t.log(`logins refused before one went through: ${refused}`);
    await roundTrip(t, later, 8);
    // And the half-sent request is dropped: by the provider, or by the target's reaper.
    await eventually(() => raw.ended, 'the target to close the half-sent request', LOGIN_TIMEOUT_MS * 10);
  });

  test.serial(`${provider}: fabric connections beyond pre_login_connections are refused until a slot frees`, async (t) => {
    const LIMIT = 3;
    const f = await startTarget(provider, undefined, { loginTimeoutMs: 60_000, preLoginConnections: LIMIT });
    t.teardown(() => f.close());
    const transport = new FabricInitiatorTransport();
    const idle: Awaited<ReturnType<FabricInitiatorTransport['connect']>>[] = [];
    const opts = {
      address: '127.0.0.1',
      port: f.port,
      provider,
      maxCapsule: 8240,
      queueDepth: 16,
      receiveSize: 1024,
      ioPoolSize: 1 << 20,
      ioChunkSize: 1 << 20,
    };
    // Connected at the fabric level, never logging in.
    for (let i = 0; i < LIMIT; i++) idle.push(await transport.connect(opts));
    t.teardown(() => Promise.all(idle.map((c) => c.close())).then(() => undefined));
    await eventually(() => f.server.preLoginConnections === LIMIT, 'the target to count the idle connections');

    await t.throwsAsync(transport.connect(opts), undefined, 'a fabric connection beyond the limit is refused');
    await t.throwsAsync(f.connect(), undefined, 'so is a login, while the slots are taken');
    const refusals = f.log.filter((l) => /pre_login_connections/.test(l.message));
    t.is(refusals.length, 1, 'one log line for the refusals in a burst');

    await idle.pop()!.close();
    await eventually(() => f.server.preLoginConnections < LIMIT, 'the slot to free');
    const c = await f.connect();
    await roundTrip(t, c, 5);
    // Logged in, it no longer counts: another connection gets the slot.
    t.is(f.server.preLoginConnections, LIMIT - 1);
    idle.push(await transport.connect(opts));
  });
}
