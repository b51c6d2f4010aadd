// Registered memory dies with its connection (on libfabric the region is
// closed and every view of it detached: it reads as empty). Nothing in the
// initiator may use it afterwards: a read whose answer arrives after its pool
// chunk was detached is re-sent (or fails with a typed error), never a
// TypeError; I/O through a dead RegisteredBuffer fails CONNECTION_LOST, never
// a zero-length success (docs/initiator.md "Two data paths", "Lost connections").
import test from 'ava';
import { connect, RblkError } from '../../initiator/index.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import type { ConnectOptions, InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from '../../initiator/transport/transport.js';
import { decodeCapsule, Opcode } from '../../protocol/wire/index.js';
import { pattern, startServer, until } from './helpers/target.js';

const PROVIDERS = ['tcp', 'sockets'] as const;

/**
 * A real libfabric connection whose next answer is held back when armed: the
 * connection is closed (its I/O pool closed and detached, as when the fabric
 * reports a loss), and the answer is delivered after that but before the
 * connection reports its loss. That is the order the fabric transport gives
 * when a command's answer and the loss are read in one batch.
 */
class LateAnswerConnection implements InitiatorConnection {
  onCapsule: ((capsule: Buffer) => void) | null = null;
  onClose: ((reason: string) => void) | null = null;
  onRemoteData: ((data: number) => void) | null = null;
  #held: Buffer | null = null;
  /** Version 2: a read's answer is its write's remote data (docs/protocol.md §12.1). */
  #heldData: number | null = null;

  constructor(
    private readonly inner: InitiatorConnection,
    private readonly owner: LateAnswerTransport,
  ) {
    inner.onCapsule = (c) => {
      if (this.owner.armed && decodeCapsule(Buffer.from(c), { from: 'target' }).op === Opcode.RSP) {
        this.owner.armed = false;
        // The receive buffer is registered memory too: keep a copy.
        this.#held = Buffer.from(c);
        this.inner.close().catch(() => undefined);
        return;
      }
      this.onCapsule?.(c);
    };
    inner.onRemoteData = (d) => {
      if (this.owner.armed) {
        this.owner.armed = false;
        this.#heldData = d;
        this.inner.close().catch(() => undefined);
        return;
      }
      this.onRemoteData?.(d);
    };
    inner.onClose = (reason) => {
      const held = this.#held;
      this.#held = null;
      if (held !== null) this.onCapsule?.(held);
      const data = this.#heldData;
      this.#heldData = null;
      if (data !== null) this.onRemoteData?.(data);
      this.onClose?.(reason);
    };
  }

  get provider(): string {
    return this.inner.provider;
  }
  get accept(): InitiatorConnection['accept'] {
    return this.inner.accept;
  }
  get version(): number {
    return this.inner.version;
  }
  send(capsule: Buffer): Promise<void> {
    return this.inner.send(capsule);
  }
  allocate(length: number): Promise<IoBuffer> {
    return this.inner.allocate(length);
  }
  register(memory: SessionMemory): IoBuffer {
    return this.inner.register(memory);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

class LateAnswerTransport implements InitiatorTransport {
  readonly name = 'fabric' as const;
  armed = false;
  readonly #inner = new FabricInitiatorTransport();

  memory(size: number): SessionMemory {
    return this.#inner.memory(size);
  }

  async connect(opts: ConnectOptions): Promise<InitiatorConnection> {
    return new LateAnswerConnection(await this.#inner.connect(opts), this);
  }
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: a read answered after its pool memory was released is sent again and returns the right bytes`, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0 }]);
    const transport = new LateAnswerTransport();
    const s = await connect(target.options({ transport, reconnect: { initialDelayMs: 10, maxDelayMs: 50 } }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    // Larger than the immediate-data size, so the bytes go through a pool chunk both ways.
    const data = pattern(64 * 1024, 4);
    await vol.write(0, data);

    const states: string[] = [];
    s.on('state', (state) => states.push(state));
    transport.armed = true;
    const outcome = await vol.read(0, data.length).then(
      (bytes) => ({ bytes, error: null }),
      (error: unknown) => ({ bytes: null, error }),
    );
    t.false(transport.armed, 'the answer was never held: the test did not run');
    if (outcome.error !== null) {
      t.true(outcome.error instanceof RblkError, `the read failed with ${String(outcome.error)}`);
      t.is(typeof (outcome.error as RblkError).code, 'string');
    } else {
      t.true(outcome.bytes?.equals(data), 'the read resolved with other bytes');
    }
    t.deepEqual(states.slice(0, 2), ['reconnecting', 'connected'], 'the connection was lost and came back');
  });

  test.serial(`${provider}: a RegisteredBuffer outlives its connection (its bytes stay, its views carry I/O after the reconnect); once released, I/O through it fails BUFFER_RELEASED, never a zero-length success`, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0 }]);
    const s = await connect(target.options({ reconnect: { initialDelayMs: 10, maxDelayMs: 50 } }));
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const vol = await s.open('vol0');
    await vol.write(0, pattern(16384, 5));
    const reg = s.allocate(16384);
    reg.buffer.set(pattern(16384, 6));
    const view = reg.buffer.subarray(4096, 8192);

    const first = [...target.server.sessions];
    for (const ts of first) await ts.logout();
    await until(() => s.state === 'connected' && [...target.server.sessions].some((x) => !first.includes(x)), 'the session to reconnect');
    t.true(reg.valid, 'the buffer is the session\'s, not its connection\'s');
    t.true(reg.buffer.equals(pattern(16384, 6)), 'the caller\'s bytes were not detached or emptied');
    t.true(view.equals(pattern(16384, 6).subarray(4096, 8192)), 'nor were a view\'s');
    await vol.write(0, reg);
    t.true((await vol.read(0, 16384)).equals(pattern(16384, 6)), 'the whole buffer was written on the new connection');
    view.fill(0);
    await vol.read(4096, view);
    t.true(view.equals(pattern(16384, 6).subarray(4096, 8192)), 'a view was read into on the new connection');

    reg.release();
    t.is(reg.buffer.length, 0, 'release() detached the memory');
    const message = /: the registered buffer was released; allocate a new one$/;
    for (const io of [vol.write(0, reg), vol.write(4096, view), vol.read(0, reg), vol.read(4096, view)]) {
      const e = await t.throwsAsync(io, { instanceOf: RblkError, message });
      t.is(e?.code, 'BUFFER_RELEASED');
    }
    t.true((await vol.read(0, 16384)).equals(pattern(16384, 6)), 'nothing was written after the release');
  });
}
