// A write lost on one gateway and reissued on another (docs/initiator.md
// "Multipath", docs/protocol.md §14.1). Two in-process targets serve one
// store through a view each, as two rblkd serve one RBD image; a view can be
// fenced out of the store the way the Ceph blocklist fences a gateway: its
// operations fail with EBLOCKLISTED (ESHUTDOWN), those held and those to come.
// Gateway A holds the write and its connection is severed on the initiator's
// side only, so A never learns of the loss (a frozen or cut-off gateway), and
// A refuses new connections. The session must ask B to fence A before it
// reissues the write there; when B cannot, the write must fail rather than be
// reissued. The real store is test/daemon/rbd-gateway-fence.test.ts.
import test, { type ExecutionContext } from 'ava';
import { connect, RblkError, type Session } from '../../initiator/index.js';
import type { ConnectOptions as TransportConnectOptions, InitiatorConnection } from '../../initiator/transport/transport.js';
import { Opcode, TaskFunction, type Capsule } from '../../protocol/wire/index.js';
import type { Backend, Extent, GatewayFenceResult, WriteOptions } from '../../target/backend/backend.js';
import { backendError } from '../../target/backend/backend-error.js';
import { MemoryBackend } from '../../target/backend/memory.js';
import { TargetPortGroups } from '../../target/scsi/port-groups.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { Gate } from './helpers/gated-backend.js';
import type { SpyTransport } from './helpers/spy-transport.js';
import { pattern, startServer, until, type TestTarget } from './helpers/target.js';

checkSuiteResources(test);

const MiB = 1 << 20;
const X = 64 * 1024;
const ID = '0b5e8d1c-6f0a-4c1e-9a8d-2f3b4c5d6e7f';

/** One gateway's view of the shared store. */
class View implements Backend {
  readonly readOnly = false;
  readonly canDiscard = false;
  readonly sharedIdentity = ID;
  fenced = false;
  writeGate: Gate | null = null;
  writes = 0;
  /** Writes that have left this view, landed or refused. */
  settled = 0;
  /** The groups this gateway was asked to fence; a fence throws while refuse is set. */
  readonly asked: number[] = [];
  refuse: Error | null = null;

  constructor(
    private readonly store: MemoryBackend,
    private readonly cluster: Map<number, View>,
    group: number,
  ) {
    cluster.set(group, this);
  }

  get size(): number {
    return this.store.size;
  }

  #check(op: string): void {
    if (this.fenced) throw backendError('ESHUTDOWN', `${op} refused: this gateway is fenced out of the store`);
  }

  async read(buf: Buffer, offset: number): Promise<void> {
    this.#check('read');
    await this.store.read(buf, offset);
  }

  async write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    this.writes++;
    try {
      this.#check('write');
      await this.writeGate?.pass();
      this.#check('write');
      await this.store.write(buf, offset, opts);
    } finally {
      this.settled++;
    }
  }

  async flush(): Promise<void> {
    this.#check('flush');
    await this.store.flush();
  }

  discard(offset: number, length: number): Promise<void> {
    return this.store.discard(offset, length);
  }

  writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    return this.store.writeZeroes(offset, length, unmap);
  }

  extent(offset: number): Promise<Extent> {
    return this.store.extent(offset);
  }

  refreshSize(): Promise<number> {
    return this.store.refreshSize();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  fenceGateway(group: number): Promise<GatewayFenceResult> {
    this.asked.push(group);
    if (this.refuse !== null) return Promise.reject(this.refuse);
    const other = this.cluster.get(group);
    if (other === undefined) return Promise.resolve({ kind: 'unknown' });
    other.fenced = true;
    return Promise.resolve({ kind: 'fenced', address: `view of group ${group}` });
  }
}

interface Pair {
  store: MemoryBackend;
  a: TestTarget;
  b: TestTarget;
  viewA: View;
  viewB: View;
  session: Session;
  spy: SpyTransport;
  /** What the initiator sent on its connections to B. */
  sentToB(): Capsule[];
  /** A stops answering: its connections are severed on the initiator's side, and new ones refused. */
  cut(): void;
}

const groups = (local: number, state: 'active-optimized' | 'active-non-optimized', peerState: 'active-optimized' | 'active-non-optimized'): TargetPortGroups =>
  new TargetPortGroups({ local: { group: local, state, relativePort: local }, peers: [{ group: local === 1 ? 2 : 1, state: peerState, relativePort: local === 1 ? 2 : 1 }] });

async function pair(t: ExecutionContext): Promise<Pair> {
  const store = new MemoryBackend({ size: 4 * MiB, name: 'shared' });
  const cluster = new Map<number, View>();
  const viewA = new View(store, cluster, 1);
  const viewB = new View(store, cluster, 2);
  const a = await startServer('loop', [{ name: 'vol', lun: 0, backend: viewA, identifier: ID, portGroups: groups(1, 'active-optimized', 'active-non-optimized') }]);
  const b = await startServer('loop', [{ name: 'vol', lun: 0, backend: viewB, identifier: ID, portGroups: groups(2, 'active-non-optimized', 'active-optimized') }]);
  const options = a.options({
    paths: [a, b].map((g) => ({ address: g.address, port: g.port })),
    timeouts: { lossMs: 20_000 },
    reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
  });
  const spy = options.transport as SpyTransport;
  let cutOff = false;
  // Sockets of a connection to B, found by the port it was opened to.
  const toB = new WeakSet<InitiatorConnection>();
  const connectInner = spy.connect.bind(spy);
  spy.connect = async (o: TransportConnectOptions) => {
    // A, once cut off, refuses new connections too: the session must go to B.
    if (o.port === a.port && cutOff) throw new Error('test: gateway A is cut off');
    const c = await connectInner(o);
    if (o.port === b.port) toB.add(c);
    return c;
  };
  const session = await connect(options);
  t.teardown(async () => {
    viewA.writeGate?.release();
    await session.close();
    for (const c of spy.connections) if (c.severed) await c.closeInner();
    await a.close();
    await b.close();
  });
  t.like(session.paths, [{ state: 'active', group: 1 }, { state: 'ready', group: 2 }]);
  return {
    store,
    a,
    b,
    viewA,
    viewB,
    session,
    spy,
    sentToB: () => spy.connections.filter((c) => toB.has(c)).flatMap((c) => c.sent),
    cut() {
      cutOff = true;
      for (const c of spy.connections) if (!toB.has(c)) c.sever('test: gateway A stopped answering');
    },
  };
}

test.serial('loop: a write lost on gateway A is reissued on B only after B fenced A; A\'s held copy never lands over the newer write', async (t) => {
  const p = await pair(t);
  const vol = await p.session.open('vol');
  await vol.write(X, pattern(4096, 1));
  p.viewA.writeGate = new Gate();
  const held = vol.write(X, pattern(4096, 2));
  await until(() => p.viewA.writes === 2, "the write to be held in A's store");
  p.cut();
  await held;
  t.deepEqual(p.viewB.asked, [1], 'B was asked to fence group 1');
  const sent = p.sentToB();
  const fenceAt = sent.findIndex((c) => c.op === Opcode.TSK_MGMT && c.function === TaskFunction.FENCE_GATEWAY && c.taskTag === 1n && c.lun === 0);
  // WRITE(10) or WRITE(16) (SBC-4 5.40, 5.42).
  const reissuedAt = sent.findIndex((c, i) => i > fenceAt && c.op === Opcode.CMD && (c.cdb[0] === 0x2a || c.cdb[0] === 0x8a));
  t.true(fenceAt >= 0 && reissuedAt > fenceAt, 'FENCE GATEWAY went to B before the reissued write');
  const newer = pattern(4096, 3);
  await vol.write(X, newer);
  // A's held copy is let go only now, after the newer write was acknowledged.
  p.viewA.writeGate.release();
  await until(() => p.viewA.settled === 2, "A's held copy to leave A's view of the store");
  const direct = Buffer.alloc(4096);
  await p.store.read(direct, X);
  t.true(direct.equals(newer), 'the store holds the newer, acknowledged write');
  t.true((await vol.read(X, 4096)).equals(newer), 'and it reads back through B');
  t.true(p.b.log.some((l) => l.message === 'FENCE GATEWAY of target port group 1 on LUN 0: the gateway of group 1 (client view of group 1) is fenced out of the store'));
});

test.serial('loop: when B cannot fence A, the write lost on A fails (CONNECTION_LOST) instead of being reissued, and the session goes on through B', async (t) => {
  const p = await pair(t);
  const vol = await p.session.open('vol');
  await vol.write(X, pattern(4096, 1));
  p.viewB.refuse = new Error('the monitors did not answer');
  p.viewA.writeGate = new Gate();
  const held = vol.write(X, pattern(4096, 2));
  await until(() => p.viewA.writes === 2, "the write to be held in A's store");
  p.cut();
  const e = await t.throwsAsync(held, { instanceOf: RblkError });
  t.is(e?.code, 'CONNECTION_LOST');
  t.regex(e?.message ?? '', /could not be fenced/);
  t.deepEqual(p.viewB.asked, [1]);
  t.is(p.viewB.writes, 0, 'the write was not reissued on B');
  t.true(p.b.log.some((l) => /FENCE GATEWAY of target port group 1 on LUN 0: the fence of group 1 failed: the monitors did not answer/.test(l.message)));
  // Later commands are not lost ones: they go to B without a fence.
  const later = pattern(4096, 4);
  await vol.write(2 * X, later);
  t.is(p.viewB.writes, 1);
  t.true((await vol.read(2 * X, 4096)).equals(later));
  t.deepEqual(p.viewB.asked, [1], 'no second fence for commands that were never on A');
});
