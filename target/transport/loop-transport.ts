// The in-process transport (as nvme-loop is to nvmet-rdma): the same
// TargetConnection contract over native/loop-fabric.ts, so the rblk front end
// and the SCSI core can be tested end to end without libfabric. Addresses
// are names ("loop:<address>:<port>"); RMA is a checked copy.
import {
  connectDataBuffer,
  ConnectKind,
  ConnectRejectReason,
  decodeConnectData,
  ProtocolError,
  PROTOCOL_VERSION,
  type ConnectRequestData,
  type DataDescriptor,
} from '../../protocol/wire/index.js';
import { LoopChunkPool, loopListen, loopRead, loopWrite, LoopEnd } from '../../native/loop-fabric.js';
import type { DataBuffer, PortHandlers, PortOptions, TargetConnection, TargetPort, TargetTransport } from './transport.js';

let nextConnectionId = 1;
let nextPort = 1;

class LoopConnection implements TargetConnection {
  readonly id = nextConnectionId++;
  readonly provider = 'loop';
  /** The loop has no remote CQ data: reads always end with an RSP. */
  readonly remoteData = false;
  onCapsule: ((capsule: Buffer) => void) | null = null;
  onClose: ((reason: string) => void) | null = null;
  /** Every capsule reaches onCapsule here: the loop has no fast path. */
  received = 0;
  private closed = false;

  constructor(
    private readonly end: LoopEnd,
    readonly peer: string,
    readonly request: ConnectRequestData,
    readonly version: number,
    readonly recvBuffers: number,
    private readonly pool: LoopChunkPool,
    readonly maxCapsule: number,
    private readonly onGone: () => void,
  ) {
    end.onMessage = (msg) => {
      // A provider would fail a SEND larger than the posted buffer; so does the loop.
      if (msg.length > this.maxCapsule) {
        void this.close(`a ${msg.length}-byte capsule overran the ${this.maxCapsule}-byte receive buffer`);
        return;
      }
      this.received++;
      this.onCapsule?.(msg);
    };
    end.onClose = (reason) => this.finish(reason);
  }

  /** The loop has no posted buffers to add: a message is delivered as it is sent. */
  openReceiveRing(): void {}

  send(capsule: Buffer): Promise<void> {
    return this.end.send(capsule);
  }

  async allocate(length: number): Promise<DataBuffer> {
    if (length > this.pool.chunkSize) throw new RangeError(`data length ${length} exceeds ${this.pool.chunkSize}`);
    const chunk = await this.pool.acquire();
    let released = false;
    return {
      buffer: chunk.buffer.subarray(0, length),
      release: () => {
        if (released) return;
        released = true;
        this.pool.release(chunk.index);
      },
    };
  }

  read(into: DataBuffer, offset: number, remote: readonly DataDescriptor[]): Promise<void> {
    return loopRead(into.buffer.subarray(offset), remote);
  }

  write(from: DataBuffer, offset: number, remote: readonly DataDescriptor[]): Promise<void> {
    return loopWrite(from.buffer.subarray(offset), remote);
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onGone();
    this.onClose?.(reason);
  }

  async close(reason: string): Promise<void> {
    if (this.closed) return;
    this.end.close(reason);
    this.finish(reason);
  }
}

export class LoopTargetTransport implements TargetTransport {
  readonly name = 'loop' as const;

  async listen(opts: PortOptions, handlers: PortHandlers): Promise<TargetPort> {
    const port = opts.port === 0 ? nextPort++ : opts.port;
    const name = `${opts.address}:${port}`;
    const pool = new LoopChunkPool(opts.maxIo, opts.dataBuffers);
    const connections = new Set<LoopConnection>();
    const highest = opts.protocolVersion ?? PROTOCOL_VERSION;
    const reject = (reason: ConnectRejectReason): { reject: Buffer } => ({
      reject: connectDataBuffer({ kind: ConnectKind.REJECT, version: highest, reason }),
    });
    const unlisten = loopListen(name, (pd) => {
      let request: ConnectRequestData;
      try {
        request = decodeConnectData(pd, ConnectKind.CONNECT);
      } catch (e) {
        return reject(e instanceof ProtocolError && e.reason === 'BAD_VERSION' ? ConnectRejectReason.UNSUPPORTED_VERSION : ConnectRejectReason.BAD_PRIVATE_DATA);
      }
      const version = request.version ?? 1;
      if (version > highest) return reject(ConnectRejectReason.UNSUPPORTED_VERSION);
      const decision = handlers.admit(request, `loop:${name}`);
      if ('reject' in decision) return reject(decision.reject);
      const end = new LoopEnd();
      const { recvBuffers, maxCapsule } = decision.accept;
      const conn = new LoopConnection(end, `loop:${name}`, request, version, recvBuffers, pool, maxCapsule, () => connections.delete(conn));
      connections.add(conn);
      // Connected once the initiator holds its end (next turn), as FI_CONNECTED would be.
      setImmediate(() => handlers.connected(conn));
      return { end, privateData: connectDataBuffer({ kind: ConnectKind.ACCEPT, version, maxCapsule, recvBuffers }) };
    });
    let accepting = true;
    const stopAccepting = async (): Promise<void> => {
      if (accepting) unlisten();
      accepting = false;
    };
    return {
      provider: 'loop',
      address: opts.address,
      port,
      stopAccepting,
      close: async () => {
        await stopAccepting();
        for (const c of [...connections]) await c.close('the port is closing');
        pool.close();
      },
    };
  }
}
