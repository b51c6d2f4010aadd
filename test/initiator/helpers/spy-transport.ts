// An initiator transport that wraps another and watches the capsules the
// initiator sends: tests see which connection carried which command, act
// right after a given capsule has gone out, or make a connection a black hole
// (a target that stopped answering without the connection dropping).
import { decodeCapsule, type Capsule } from '../../../protocol/wire/index.js';
import type { ConnectOptions, InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from '../../../initiator/transport/transport.js';

export class SpyConnection implements InitiatorConnection {
  readonly sent: Capsule[] = [];
  /** Capsules are swallowed: the target never sees them. */
  blackhole = false;
  /** sever() was called. */
  severed = false;

  constructor(
    private readonly inner: InitiatorConnection,
    private readonly spy: SpyTransport,
  ) {}

  get provider(): string {
    return this.inner.provider;
  }
  get accept(): InitiatorConnection['accept'] {
    return this.inner.accept;
  }
  get version(): number {
    return this.inner.version;
  }
  get onRemoteData(): InitiatorConnection['onRemoteData'] {
    return this.inner.onRemoteData;
  }
  set onRemoteData(f: InitiatorConnection['onRemoteData']) {
    this.inner.onRemoteData = f;
  }
  get onCapsule(): InitiatorConnection['onCapsule'] {
    return this.inner.onCapsule;
  }
  set onCapsule(f: InitiatorConnection['onCapsule']) {
    this.inner.onCapsule = f;
  }
  get onClose(): InitiatorConnection['onClose'] {
    return this.inner.onClose;
  }
  set onClose(f: InitiatorConnection['onClose']) {
    this.inner.onClose = f;
  }

  async send(capsule: Buffer): Promise<void> {
    const c = decodeCapsule(Buffer.from(capsule), { from: 'initiator' });
    this.sent.push(c);
    if (this.blackhole) return;
    const p = this.inner.send(capsule);
    this.spy.onSend?.(c, this);
    await p;
  }

  allocate(length: number): Promise<IoBuffer> {
    return this.inner.allocate(length);
  }
  register(memory: SessionMemory): IoBuffer {
    return this.inner.register(memory);
  }
  close(): Promise<void> {
    // Severed: the initiator's close does not reach the target (closeInner does).
    if (this.severed) return Promise.resolve();
    return this.inner.close();
  }

  /**
   * The initiator sees the connection drop and the target does not (a link
   * that died on the initiator's side): its capsules stop arriving here, and
   * the target's end stays open until the target ends it or closeInner().
   */
  sever(reason = 'severed by the test'): void {
    if (this.severed) return;
    this.severed = true;
    const onClose = this.inner.onClose;
    this.inner.onClose = null;
    this.inner.onCapsule = () => undefined;
    onClose?.(reason);
  }

  closeInner(): Promise<void> {
    return this.inner.close();
  }
}

export class SpyTransport implements InitiatorTransport {
  readonly connections: SpyConnection[] = [];
  /** connect() calls made, and those that have not settled yet. */
  connects = 0;
  pendingConnects = 0;
  /** Called right after a capsule was handed to the inner transport. */
  onSend: ((c: Capsule, conn: SpyConnection) => void) | null = null;

  constructor(private readonly inner: InitiatorTransport) {}

  get name(): InitiatorTransport['name'] {
    return this.inner.name;
  }

  memory(size: number): SessionMemory {
    return this.inner.memory(size);
  }

  async connect(opts: ConnectOptions): Promise<InitiatorConnection> {
    this.connects++;
    this.pendingConnects++;
    try {
      const c = new SpyConnection(await this.inner.connect(opts), this);
      this.connections.push(c);
      return c;
    } finally {
      this.pendingConnects--;
    }
  }
}
