// FrontEndConnection's contract, the one a new front end (NVMe/TCP) builds
// on (docs/architecture.md "A front end's connection"), checked on a minimal
// protocol: the end runs once and onEnd fires once whoever asks, drain waits
// for the outstanding commands and then asks the initiator to log out,
// settled(lun) waits for that LUN's commands only, and the keep-alive timer
// counts a change of receivedCount as activity.
import test from 'ava';
import { ScsiTarget } from '../../target/scsi/index.js';
import { noNative, type ConnectionEnvironment, type LogoutKind, type TargetLogger } from '../../target/connection/environment.js';
import { FrontEndConnection, type ConnectionFacts, type OutstandingCommand } from '../../target/connection/front-end-connection.js';

const quiet: TargetLogger = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} };

function environment(keepAliveMs = 0): ConnectionEnvironment {
  return {
    targetName: 'iqn.test',
    scsi: new ScsiTarget(),
    limits: { queueDepth: 4, maxIo: 1 << 20, inCapsuleData: 0, maxDescriptors: 1, keepAliveMs, loginTimeoutMs: 60_000 },
    log: quiet,
    lunsFor: () => new Map(),
    secretFor: () => null,
    authRequired: false,
    admitSession: () => 'ok',
    portName: 'test:0',
    fenceConnection: () => 'gone',
  };
}

/** A protocol with nothing of its own: commands are added by hand, logging out is recorded. */
class Minimal extends FrontEndConnection<number> {
  readonly id = 'm1';
  loggedInNow = true;
  ends = 0;
  asked: string[] = [];
  silent: number[] = [];
  received = 0;

  constructor(env: ConnectionEnvironment) {
    super(env);
    this.armLoginTimer(() => undefined);
  }
  get loggedIn(): boolean {
    return this.loggedInNow;
  }
  get isActive(): boolean {
    return this.serving;
  }
  get initiator(): string | null {
    return 'iqn.initiator';
  }
  protected get serving(): boolean {
    return this.loggedInNow && !this.hasEnded;
  }
  protected facts(): ConnectionFacts {
    return { id: this.id, peer: 'peer', provider: 'test', connection: 1, state: 'full', credits: 4, native: noNative('a test') };
  }
  protected meta(): Record<string, unknown> {
    return { connection: this.id };
  }
  protected async endOnce(): Promise<void> {
    // A real front end aborts its commands and waits for them here; this one leaves them.
    this.ends++;
    await new Promise((r) => setImmediate(r));
    this.finish();
  }
  protected askLogout(_kind: LogoutKind | number, why: string): Promise<void> {
    this.asked.push(why);
    return this.end(why);
  }
  protected detach(p: Promise<unknown>): void {
    p.catch(() => undefined);
  }
  protected override receivedCount(): number {
    return this.received;
  }

  /** A command on `lun` that answers when the returned function is called. */
  command(tag: number, lun: number): () => void {
    let answer!: () => void;
    const c: OutstandingCommand = { lun, request: null, done: new Promise<void>((r) => (answer = r)) };
    this.outstanding.set(tag, c);
    return () => {
      answer();
      this.outstanding.delete(tag);
      this.wakeIfIdle();
    };
  }
  login(): void {
    this.stopTimer();
    this.lastHeard = Date.now();
    this.startKeepAlive((quietMs) => this.silent.push(quietMs));
  }
  endNow(why: string): Promise<void> {
    return this.end(why);
  }
}

test('the end runs once and onEnd fires once, whoever asks and however often', async (t) => {
  const c = new Minimal(environment());
  let ended = 0;
  c.onEnd = () => ended++;
  const a = c.endNow('first');
  const b = c.endNow('second');
  c.fence('third');
  await Promise.all([a, b, c.closed]);
  await c.logout('admin', 'after the end');
  await c.drain(10);
  t.is(c.ends, 1);
  t.is(ended, 1);
});

test('drain waits for the outstanding commands, then asks the initiator to log out', async (t) => {
  const c = new Minimal(environment());
  const answer = c.command(1, 0);
  const drained = c.drain(5_000);
  await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(c.asked, []);
  t.is(c.info().inFlight, 1);
  answer();
  await drained;
  t.deepEqual(c.asked, ['target shutting down']);
});

test('a connection not logged in is ended by drain and logout without being asked', async (t) => {
  const c = new Minimal(environment());
  c.loggedInNow = false;
  await c.drain(10);
  t.deepEqual(c.asked, []);
  t.is(c.ends, 1);
});

test('settled(lun) waits for that LUN\'s commands only, and the end settles it', async (t) => {
  const c = new Minimal(environment());
  const on0 = c.command(1, 0);
  c.command(2, 1);
  let settled = false;
  void c.settled(0).then(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  t.false(settled);
  on0();
  await c.settled(0);
  let lun1 = false;
  void c.settled(1).then(() => (lun1 = true));
  await new Promise((r) => setImmediate(r));
  t.false(lun1, "LUN 1's command is still running");
  void c.endNow('gone');
  await c.closed;
  await new Promise((r) => setImmediate(r));
  // The end resolves what still waits, though LUN 1's command never answered.
  t.true(lun1, 'the end settled the wait for LUN 1');
  t.true(await Promise.race([c.settled(1).then(() => true), new Promise<boolean>((r) => setImmediate(() => r(false)))]), 'after the end, settled() resolves at once');
});

test('info() carries the common fields in the order ctl prints them', (t) => {
  const c = new Minimal(environment());
  t.deepEqual(Object.keys(c.info()), ['id', 'initiator', 'peer', 'provider', 'port', 'connection', 'state', 'credits', 'inFlight', 'ops', 'readBytes', 'writeBytes', 'errors', 'native', 'since', 'loggedInAt']);
  t.is(c.info().port, 'test:0');
  void c.endNow('done');
});

test('keep-alive counts a change of receivedCount as activity', async (t) => {
  const c = new Minimal(environment(100));
  c.login();
  const busy = setInterval(() => c.received++, 10);
  await new Promise((r) => setTimeout(r, 400));
  clearInterval(busy);
  t.true(c.silent.length >= 3, `${c.silent.length} ticks`);
  t.true(Math.max(...c.silent) < 100, `silent for ${Math.max(...c.silent)} ms while receiving`);
  await new Promise((r) => setTimeout(r, 300));
  t.true(c.silent[c.silent.length - 1]! >= 150, 'silence counts once nothing is received');
  await c.endNow('done');
});
