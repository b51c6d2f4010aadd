// The initiator's side of the in-process loop transport (tests): the same
// contract as the fabric transport, over native/loop-fabric.ts.
import { connectDataBuffer, ConnectKind, decodeConnectData, type ConnectAcceptData, type DataDescriptor } from '../../protocol/wire/index.js';
import { FabricError } from '../../native/fabric-error.js';
import { LoopChunkPool, loopConnect, LoopMemory, pageAligned, type LoopEnd } from '../../native/loop-fabric.js';
import { MemoryReleased } from '../registered-buffer.js';
import type { ConnectOptions, InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from './transport.js';
import { checkAcceptVersion, negotiateVersion } from './version.js';

function ioBuffer(memory: LoopMemory, offset: number, length: number, release: () => void): IoBuffer {
  return {
    buffer: memory.buffer.subarray(offset, offset + length),
    segments(o = 0, l = length - o): DataDescriptor[] {
      if (o < 0 || l < 0 || o + l > length) throw new RangeError('segment outside the buffer');
      return [{ address: BigInt(offset + o), key: memory.key, length: l }];
    },
    release,
  };
}

class LoopInitiatorConnection implements InitiatorConnection {
  readonly provider = 'loop';
  onCapsule: ((capsule: Buffer) => void) | null = null;
  onClose: ((reason: string) => void) | null = null;
  /** The loop target never sends remote CQ data. */
  onRemoteData: ((data: number) => void) | null = null;
  private closed = false;
  /** Zero-copy registrations, ended with the connection. */
  private readonly registered = new Set<LoopMemory>();

  constructor(
    readonly version: number,
    private readonly end: LoopEnd,
    readonly accept: ConnectAcceptData,
    private readonly pool: LoopChunkPool,
  ) {
    end.onMessage = (msg) => this.onCapsule?.(msg);
    end.onClose = (reason) => this.finish(reason);
  }

  send(capsule: Buffer): Promise<void> {
    return this.end.send(capsule);
  }

  async allocate(length: number): Promise<IoBuffer> {
    if (length > this.pool.chunkSize) throw new RangeError(`I/O of ${length} bytes exceeds the ${this.pool.chunkSize}-byte pool chunk`);
    const chunk = await this.pool.acquire();
    let released = false;
    return ioBuffer(this.pool.memory, chunk.offset, length, () => {
      if (released) return;
      released = true;
      this.pool.release(chunk.index);
    });
  }

  register(memory: SessionMemory): IoBuffer {
    if (this.closed) throw new MemoryReleased('the connection is closed');
    const mem = new LoopMemory(memory.buffer, { remote: true });
    // As a domain's close deregisters its regions, the connection's end ends this registration.
    this.registered.add(mem);
    return ioBuffer(mem, 0, memory.buffer.length, () => {
      this.registered.delete(mem);
      mem.close();
    });
  }

  private finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.close();
    for (const mem of this.registered) mem.close();
    this.registered.clear();
    this.onClose?.(reason);
  }

  async close(): Promise<void> {
    this.end.close('closed by the initiator');
    this.finish('closed by the initiator');
  }
}

export class LoopInitiatorTransport implements InitiatorTransport {
  readonly name = 'loop' as const;

  memory(size: number): SessionMemory {
    // WebAssembly memory cannot be detached: free() only stops handing out the view.
    let buffer = pageAligned(size);
    return {
      get buffer() {
        return buffer;
      },
      free: () => {
        buffer = Buffer.alloc(0);
      },
    };
  }

  connect(opts: ConnectOptions): Promise<InitiatorConnection> {
    return negotiateVersion(opts.protocolVersion, (version) => this.attempt(opts, version));
  }

  private async attempt(opts: ConnectOptions, version: number): Promise<InitiatorConnection> {
    const pd = connectDataBuffer({ kind: ConnectKind.CONNECT, version, maxCapsule: opts.maxCapsule, queueDepth: opts.queueDepth });
    const { end, privateData } = await loopConnect(`${opts.address}:${opts.port}`, pd);
    let accept: ConnectAcceptData;
    try {
      accept = decodeConnectData(privateData, ConnectKind.ACCEPT);
    } catch (e) {
      end.close('bad accept');
      throw new FabricError(71, 'fi_connect', `the target's accept data is invalid: ${(e as Error).message}`, 'EPROTO');
    }
    try {
      checkAcceptVersion(version, accept.version);
    } catch (e) {
      end.close('bad accept');
      throw e;
    }
    const pool = new LoopChunkPool(opts.ioChunkSize, Math.max(1, Math.floor(opts.ioPoolSize / opts.ioChunkSize)), { remote: true });
    return new LoopInitiatorConnection(version, end, accept, pool);
  }
}
