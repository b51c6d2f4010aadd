// A connection that speaks capsules by hand (docs/protocol.md §7-§12), so that a soak can
// stop at any protocol step or send whatever bytes it likes: the fabric transport of the
// library without its session layer.
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import type { InitiatorConnection, IoBuffer } from '../../initiator/transport/transport.js';
import { capsuleBuffer, DEFAULT_TARGET_NAME, decodeCapsule, Opcode, type Capsule, type LoginResponse } from '../../protocol/wire/index.js';
import { within } from './processes.js';

const transport = new FabricInitiatorTransport();

export class RawConnection {
  closed = false;
  closeReason = '';
  /** Capsules from the target that did not decode: the target broke the protocol. */
  undecodable = 0;
  #inbox: Capsule[] = [];
  #waiter: (() => void) | null = null;

  private constructor(readonly conn: InitiatorConnection) {
    // Protocol version 2: a GOOD read is answered by its data's remote CQ data
    // (docs/protocol.md §12.1); it reaches the inbox as the RSP it stands for.
    conn.onRemoteData = (d) => {
      this.#inbox.push({ op: Opcode.RSP, tag: BigInt(d), creditDelta: 1, status: 0, sense: Buffer.alloc(0), dataOutResidual: null, dataInResidual: null });
      this.#waiter?.();
    };
    conn.onCapsule = (buf) => {
      try {
        this.#inbox.push(decodeCapsule(Buffer.from(buf), { from: 'target' }));
      } catch {
        this.undecodable++;
      }
      this.#waiter?.();
    };
    conn.onClose = (reason) => {
      this.closed = true;
      this.closeReason = reason;
      this.#waiter?.();
    };
  }

  static async open(provider: string, port: number, o: { queueDepth?: number; ioBytes?: number } = {}): Promise<RawConnection> {
    const io = o.ioBytes ?? 128 * 1024;
    const conn = await transport.connect({
      address: '127.0.0.1',
      port,
      provider,
      maxCapsule: 8192 + 48,
      queueDepth: o.queueDepth ?? 8,
      receiveSize: 4096,
      ioPoolSize: io,
      ioChunkSize: io,
      timeoutMs: 5000,
    });
    return new RawConnection(conn);
  }

  /** Sends bytes; false when the connection is gone (a send racing the target's disconnect). */
  async send(bytes: Buffer): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.conn.send(bytes);
      return true;
    } catch {
      return false;
    }
  }

  sendCapsule(c: Capsule): Promise<boolean> {
    return this.send(capsuleBuffer(c));
  }

  /** The next capsule from the target, or null when the connection closed or ms passed. */
  async next(ms: number): Promise<Capsule | null> {
    const end = Date.now() + ms;
    for (;;) {
      const c = this.#inbox.shift();
      if (c !== undefined) return c;
      if (this.closed) return null;
      const left = end - Date.now();
      if (left <= 0) return null;
      await within(
        new Promise<void>((r) => (this.#waiter = r)),
        left,
        null,
      );
      this.#waiter = null;
    }
  }

  allocate(length: number): Promise<IoBuffer> {
    return this.conn.allocate(length);
  }

  /** LOGIN_REQ; resolves the target's first answer (LOGIN_RSP, LOGIN_CHALLENGE, LOGIN_REJ) or null. */
  async loginRequest(initiatorName: string, credits: number, ms = 5000): Promise<Capsule | null> {
    const ok = await this.sendCapsule({
      op: Opcode.LOGIN_REQ,
      tag: 1n,
      authRequired: false,
      maxItCapsule: this.conn.accept.maxCapsule,
      maxTiCapsule: 1024,
      immediateDataSize: 4096,
      credits,
      initiatorName,
      targetName: DEFAULT_TARGET_NAME,
    });
    return ok ? this.next(ms) : null;
  }

  /** A full unauthenticated login; the grant, or null. */
  async login(initiatorName: string, credits: number): Promise<LoginResponse | null> {
    const a = await this.loginRequest(initiatorName, credits);
    return a !== null && a.op === Opcode.LOGIN_RSP ? a : null;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.conn.close().catch(() => undefined);
  }
}
