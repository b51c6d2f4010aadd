// One peer cannot lock everyone out (docs/operations.md "Connection limits"):
// idle connections from one source address count against
// limits.pre_login_per_source as well as pre_login_connections, over every
// listener, so a flood of them from 127.0.0.2 leaves room for other
// initiators, on rblk (the library, from 127.0.0.1) and on iSCSI (a raw login
// from 127.0.0.3); the flooder's connections beyond its share are closed at
// accept. On loopback, 127.0.0.2 and 127.0.0.3 stand for other hosts.
import test from 'ava';
import { connect as tcpConnect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '../../config/loader.js';
import { connect } from '../../initiator/index.js';
import { IscsiPortal } from '../../target/iscsi/portal.js';
import { sourceOf } from '../../target/peer-source.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { FabricTargetTransport } from '../../target/transport/fabric-transport.js';
import type { TargetPort } from '../../target/transport/transport.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { exportMemoryVolume, memoryLog } from '../helpers/target-fixture.js';
import { loginStatus, RawInitiator } from '../iscsi/raw-initiator.js';
import { until as eventually } from '../../bench/kit/wait.js';

const TARGET = 'iqn.2026-12.io.rblk:per-source';
const BUDGET = 8;
const PER_SOURCE = 2;
const FLOOD = BUDGET;

type Idle = Socket & { ended: boolean };

/** A TCP connection from `from` that says nothing, as a peer holding slots does. */
function idle(port: number, from: string): Promise<Idle> {
  return new Promise((resolve, reject) => {
    const s = tcpConnect({ host: '127.0.0.1', port, localAddress: from }) as Idle;
    s.ended = false;
    s.on('close', () => (s.ended = true));
    s.once('connect', () => {
      s.removeListener('error', reject);
      s.on('error', () => (s.ended = true));
      resolve(s);
    });
    s.once('error', reject);
  });
}

/** A target with an rblk (tcp) listener and an iSCSI portal, BUDGET pre-login slots, PER_SOURCE of them per address. */
async function serve(preLoginGraceMs = 600_000): Promise<{ server: TargetServer; log: ReturnType<typeof memoryLog>; rblkPort: TargetPort; portal: IscsiPortal }> {
  const log = memoryLog();
  const server = new TargetServer(
    {
      targetName: TARGET,
      limits: {
        queueDepth: 16,
        maxIo: 1 << 20,
        inCapsuleData: 8192,
        maxDescriptors: 16,
        keepAliveMs: 0,
        loginTimeoutMs: 60_000,
        maxSessions: 16,
        preLoginConnections: BUDGET,
        preLoginPerSource: PER_SOURCE,
        // Long unless a test says otherwise: a slow machine must not turn a refusal into an eviction.
        preLoginGraceMs,
        dataBuffers: 16,
      },
      authRequired: false,
      secrets: new Map(),
      log,
    },
    rblkConnections,
  );
  server.addVolume(exportMemoryVolume({ name: 'vol0', lun: 0, size: 4 << 20 }));
  const rblkPort = await server.listen({ transport: new FabricTargetTransport(), provider: 'tcp', address: '127.0.0.1', port: 0 });
  const portal = await server.listenWith((host) => IscsiPortal.listen(host, { address: '127.0.0.1', port: 0 }));
  return { server, log, rblkPort, portal };
}

test('idle connections from one address take only its share of pre-login slots: other peers log in over rblk and iSCSI', async (t) => {
  const { server, log, rblkPort, portal } = await serve();
  const sockets: Idle[] = [];
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await server.close();
  });

  // 127.0.0.2 opens as many idle iSCSI connections as the whole budget; each is either counted or closed.
  for (let i = 0; i < FLOOD; i++) sockets.push(await idle(portal.port, '127.0.0.2'));
  await eventually(() => server.preLoginConnections + sockets.filter((s) => s.ended).length === FLOOD, 'the target to take or close every connection');

  // rblk, through the library, from 127.0.0.1: logs in and does I/O.
  const session = await connect({ address: '127.0.0.1', port: rblkPort.port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:other', targetName: TARGET });
  t.teardown(() => session.close());
  const volume = await session.open(0);
  await volume.write(0, Buffer.alloc(4096, 0x5a));
  t.true((await volume.read(0, 4096)).equals(Buffer.alloc(4096, 0x5a)));

  // iSCSI, a raw login from 127.0.0.3.
  const c = await RawInitiator.open(portal.port, '127.0.0.3');
  t.teardown(() => c.close());
  const answer = await c.login({ initiator: 'iqn.2026-12.io.rblk:third', target: TARGET });
  t.truthy(answer, 'the login from 127.0.0.3 was answered, not closed');
  t.is(loginStatus(answer!), 0);

  // 127.0.0.2 kept its share and no more: the rest were closed at accept, and logged.
  t.is(sockets.filter((s) => !s.ended).length, PER_SOURCE, '127.0.0.2 keeps its share, no more');
  t.is(server.preLoginFrom('127.0.0.2'), PER_SOURCE);
  t.true(
    log.lines.some((l) => l.message.includes('connections from 127.0.0.2 are already waiting to log in (limits.pre_login_per_source)')),
    'the refusal is logged with the address and the key',
  );

  // 127.0.0.2 is still held to its share; the sessions logged in carry on.
  const more = await idle(portal.port, '127.0.0.2');
  sockets.push(more);
  await eventually(() => more.ended, "the target to close 127.0.0.2's next connection");
  t.true((await volume.read(0, 4096)).equals(Buffer.alloc(4096, 0x5a)), 'the rblk session was not affected');
});

test('fabric connections count against their address too, on every listener: one past the share is refused, an iSCSI login from elsewhere is not', async (t) => {
  const { server, rblkPort, portal } = await serve();
  t.teardown(() => server.close());
  const transport = new FabricInitiatorTransport();
  const opts = { address: '127.0.0.1', port: rblkPort.port, provider: 'tcp', maxCapsule: 8240, queueDepth: 16, receiveSize: 1024, ioPoolSize: 1 << 20, ioChunkSize: 1 << 20 };
  // Connected at the fabric level from 127.0.0.1, never logging in: its whole share.
  const held: Awaited<ReturnType<FabricInitiatorTransport['connect']>>[] = [];
  t.teardown(() => Promise.all(held.map((c) => c.close())).then(() => undefined));
  for (let i = 0; i < PER_SOURCE; i++) held.push(await transport.connect(opts));
  await eventually(() => server.preLoginFrom('127.0.0.1') === PER_SOURCE, 'the target to count them');
  await t.throwsAsync(transport.connect(opts), undefined, 'one more from 127.0.0.1 is refused');
  // 127.0.0.1's share is full on the iSCSI portal too.
  const same = await idle(portal.port, '127.0.0.1');
  t.teardown(() => same.destroy());
  await eventually(() => same.ended, "the portal to close 127.0.0.1's connection");
  // Another address logs in.
  const c = await RawInitiator.open(portal.port, '127.0.0.3');
  t.teardown(() => c.close());
  const answer = await c.login({ initiator: 'iqn.2026-12.io.rblk:third', target: TARGET });
  t.is(answer === null ? -1 : loginStatus(answer), 0);
});

test('a source at its share whose oldest pre-login connection has waited past the grace gets the slot: the old one is ended, nobody else is touched', async (t) => {
  const GRACE = 300;
  const { server, log, portal } = await serve(GRACE);
  const sockets: Idle[] = [];
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await server.close();
  });
  // Another host's idle connection: never ended by 127.0.0.2's traffic.
  const other = await idle(portal.port, '127.0.0.3');
  sockets.push(other);
  // 127.0.0.2 fills its share with connections that will never log in (dead initiators, as far as anyone can tell).
  const stale: Idle[] = [];
  for (let i = 0; i < PER_SOURCE; i++) stale.push(await idle(portal.port, '127.0.0.2'));
  sockets.push(...stale);
  await eventually(() => server.preLoginFrom('127.0.0.2') === PER_SOURCE, 'the target to count them');
  // Within the grace, one more is refused: a burst of live logins is not thrashed.
  const early = await idle(portal.port, '127.0.0.2');
  sockets.push(early);
  await eventually(() => early.ended, 'the target to refuse a connection while the others are inside their grace');
  t.false(stale[0].ended, 'a connection inside its grace was not ended');
  await sleep(GRACE + 100);
  // Past the grace, a login from 127.0.0.2 gets in.
  const c = await RawInitiator.open(portal.port, '127.0.0.2');
  t.teardown(() => c.close());
  const answer = await c.login({ initiator: 'iqn.2026-12.io.rblk:restarted', target: TARGET });
  t.is(answer === null ? -1 : loginStatus(answer), 0, 'the login from 127.0.0.2 was answered with success');
  await eventually(() => stale[0].ended, "the target to end 127.0.0.2's oldest pre-login connection");
  t.false(stale[1].ended, 'only the oldest was ended, one for one');
  t.false(other.ended, "127.0.0.3's connection was not touched");
  t.true(log.lines.some((l) => l.message.includes('a newer connection from 127.0.0.2 took its pre-login slot (limits.pre_login_per_source)')));
  t.true(server.preLoginFrom('127.0.0.2') <= PER_SOURCE, '127.0.0.2 still holds no more than its share');
});

test('pre_login_per_source defaults to a quarter of pre_login_connections, rounded up, and warns when it is the whole budget', (t) => {
  t.is(parseConfig('', 'rblkd.yaml').limits.preLoginPerSource, 16);
  t.is(parseConfig('limits:\n  pre_login_connections: 10\n', 'rblkd.yaml').limits.preLoginPerSource, 3);
  const whole = parseConfig('limits:\n  pre_login_connections: 10\n  pre_login_per_source: 10\n', 'rblkd.yaml');
  t.is(whole.limits.preLoginPerSource, 10);
  t.true(whole.warnings.some((w) => w.path === 'limits.pre_login_per_source' && /one address can take every pre-login slot/.test(w.message)));
  t.throws(() => parseConfig('limits:\n  pre_login_per_source: 0\n', 'rblkd.yaml'), { message: /limits\.pre_login_per_source: must be at least 1/ });
});

test('a source is the peer address without its port, IPv4-mapped IPv6 as IPv4', (t) => {
  t.is(sourceOf('127.0.0.2:40112'), '127.0.0.2');
  t.is(sourceOf('127.0.0.2'), '127.0.0.2');
  t.is(sourceOf('::ffff:127.0.0.2'), '127.0.0.2');
  t.is(sourceOf('[::ffff:127.0.0.2]:3260'), '127.0.0.2');
  t.is(sourceOf('[2001:DB8::1]:3260'), '2001:db8::1');
  t.is(sourceOf('2001:db8::1'), '2001:db8::1');
  t.is(sourceOf('unknown'), 'unknown');
});
