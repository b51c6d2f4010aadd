// The initiator's libfabric transport: one FI_EP_MSG endpoint per connection,
// a remote-accessible I/O pool the target RDMA-reads and -writes, and receive
// buffers for the target's answers posted before fi_connect.
import { connectDataBuffer, ConnectKind, decodeConnectData, type ConnectAcceptData, type DataDescriptor } from '../../protocol/wire/index.js';
import { Domain, FabricError, Pages, Pool, type Endpoint, type MemoryRegion, type Slice } from '../../native/fabric.js';
import type { EndpointWakeups } from '../../native/binding.js';
import { InitiatorQueue, type InitiatorQueueOptions } from '../../native/initiator-queue.js';
import { MemoryReleased } from '../registered-buffer.js';
import type { ConnectOptions, InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from './transport.js';
import { checkAcceptVersion, negotiateVersion } from './version.js';

function ioBuffer(slice: Slice, release: () => void): IoBuffer {
  return {
    buffer: slice.buffer,
    segments(offset = 0, length = slice.length - offset): DataDescriptor[] {
      if (offset < 0 || length < 0 || offset + length > slice.length) throw new RangeError('segment outside the buffer');
      return [{ address: slice.mr.remoteBase + BigInt(slice.offset + offset), key: slice.mr.key, length }];
    },
    base: { address: slice.mr.remoteBase + BigInt(slice.offset), key: slice.mr.key },
    release,
  };
}

class FabricInitiatorConnection implements InitiatorConnection {
  onCapsule: ((capsule: Buffer) => void) | null = null;
  onClose: ((reason: string) => void) | null = null;
  onRemoteData: ((data: number) => void) | null = null;
  private closed = false;

  get wakeups(): EndpointWakeups {
    return this.ep.wakeups;
  }

  constructor(
    readonly version: number,
    private readonly domain: Domain,
    private readonly ep: Endpoint,
    readonly accept: ConnectAcceptData,
    private readonly pool: Pool,
    private readonly recvRegion: MemoryRegion,
    private readonly sendSlots: Pool,
  ) {
    ep.onReceive = (slice, length) => {
      try {
        this.onCapsule?.(slice.buffer.subarray(0, length));
      } finally {
        if (!ep.isClosed) ep.postReceive(slice);
      }
    };
    ep.onRemoteData = (data, consumed) => {
      try {
        this.onRemoteData?.(data);
      } finally {
        // FI_RX_CQ_DATA providers took a receive for it: it goes back, as after a capsule.
        if (consumed !== null && !ep.isClosed) ep.postReceive(consumed);
      }
    };
    ep.on('close', () => void this.finish('the connection was shut down'));
  }

  get provider(): string {
    return this.domain.provider;
  }

  send(capsule: Buffer): Promise<void> {
    return this.ep.sendCopy(capsule, this.sendSlots);
  }

  async allocate(length: number): Promise<IoBuffer> {
    if (length > this.pool.chunkSize) throw new RangeError(`I/O of ${length} bytes exceeds the ${this.pool.chunkSize}-byte pool chunk`);
    let chunk: Slice;
    let view: Slice;
    try {
      chunk = await this.pool.acquire();
      view = chunk.mr.slice(chunk.offset, length);
    } catch (e) {
      // A closed pool: the connection is going, whether or not it has said so yet.
      if (this.pool.mr.isClosed) throw new MemoryReleased(`the connection's I/O pool is closed: ${(e as Error).message}`);
      throw e;
    }
    let released = false;
    return ioBuffer(view, () => {
      if (released) return;
      released = true;
      if (!chunk.mr.isClosed) this.pool.release(chunk);
    });
  }

  register(memory: SessionMemory): IoBuffer {
    if (!(memory instanceof Pages)) throw new TypeError('register: the memory must come from this transport (memory())');
    const size = memory.size;
    const mr = this.domain.register(memory, { remote: true });
    // release() is synchronous and has nobody to tell: a region that will not deregister stays registered.
    return ioBuffer(mr.slice(0, size), () => void mr.close().catch(() => undefined));
  }

  attachQueue(opts: InitiatorQueueOptions): InitiatorQueue {
    return new InitiatorQueue(this.ep, opts);
  }

  private async finish(reason: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Endpoint first (cancels what is in flight), then the pool, so that
    // anyone waiting for a chunk is rejected instead of waiting forever.
    // Never rejects (an endpoint's close event calls it without waiting); the
    // user hears of the close in every case, with what could not be released.
    let why = reason;
    try {
      await this.ep.close();
      await this.pool.close().catch(() => undefined);
      await this.sendSlots.close().catch(() => undefined);
      await this.domain.close();
    } catch (e) {
      why = `${reason} (releasing the connection's memory failed: ${e instanceof Error ? e.message : String(e)})`;
    }
    this.onClose?.(why);
  }

  async close(): Promise<void> {
    await this.finish('closed by the initiator');
  }
}

export class FabricInitiatorTransport implements InitiatorTransport {
  readonly name = 'fabric' as const;

  memory(size: number): SessionMemory {
    return new Pages(size);
  }

  connect(opts: ConnectOptions): Promise<InitiatorConnection> {
    return negotiateVersion(opts.protocolVersion, (version) => this.attempt(opts, version));
  }

  private async attempt(opts: ConnectOptions, version: number): Promise<InitiatorConnection> {
    const domain = Domain.open({ provider: opts.provider, address: opts.address });
    try {
      const recvCount = opts.queueDepth + 3;
      const recvRegion = domain.register(recvCount * opts.receiveSize);
      const sendSlots = new Pool(domain, { chunkSize: opts.maxCapsule, count: opts.queueDepth + 4 });
      const ep = await domain.connect({
        address: opts.address,
        port: opts.port,
        timeoutMs: opts.timeoutMs,
        privateData: connectDataBuffer({ kind: ConnectKind.CONNECT, version, maxCapsule: opts.maxCapsule, queueDepth: opts.queueDepth }),
        prepare: (e) => {
          for (let i = 0; i < recvCount; i++) e.postReceive(recvRegion.slice(i * opts.receiveSize, opts.receiveSize));
        },
      });
      let accept: ConnectAcceptData;
      try {
        accept = decodeConnectData(ep.peerPrivateData, ConnectKind.ACCEPT);
      } catch (e) {
        throw new FabricError(71, 'fi_connect', `the target's accept data is invalid: ${(e as Error).message}`, 'EPROTO');
      }
      checkAcceptVersion(version, accept.version);
      if (opts.busyPollMicros !== undefined && opts.busyPollMicros > 0) ep.busyPollMicros = opts.busyPollMicros;
      // The I/O pool is registered once connected: an attempt that hangs in a
      // partition (reconnects overlap, docs/initiator.md) then holds no I/O memory.
      const pool = new Pool(domain, { chunkSize: opts.ioChunkSize, count: Math.max(1, Math.floor(opts.ioPoolSize / opts.ioChunkSize)), remote: true });
      return new FabricInitiatorConnection(version, domain, ep, accept, pool, recvRegion, sendSlots);
    } catch (e) {
      await domain.close();
      throw e;
    }
  }
}
