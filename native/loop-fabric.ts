// An in-process stand-in for a fabric, for the loop transports that tests use
// (like nvme-loop beside nvmet-rdma): messages between two ends of a link, and
// "remote" memory reached by (address, key) with the same checks a provider
// makes. Nothing here is registered with libfabric.
import { FabricError } from './fabric-error.js';
import type { DataDescriptor } from '../protocol/wire/fields.js';

interface Region {
  buffer: Buffer;
  remote: boolean;
}

const regions = new Map<bigint, Region>();

/**
 * Page-aligned, zeroed memory, as registered memory is (O_DIRECT backends need
 * the alignment): WebAssembly memory is mapped in whole pages from its base.
 */
export function pageAligned(bytes: number): Buffer {
  const wasmPage = 64 * 1024;
  const pages = Math.max(1, Math.ceil(bytes / wasmPage));
  return Buffer.from(new WebAssembly.Memory({ initial: pages, maximum: pages }).buffer, 0, bytes);
}

/** Fixed-size chunks of one LoopMemory with a FIFO wait when empty (the loop's data pool). */
export class LoopChunkPool {
  readonly memory: LoopMemory;
  private readonly free: number[] = [];
  private readonly waiters: ((i: number) => void)[] = [];

  constructor(readonly chunkSize: number, count: number, opts: { remote?: boolean } = {}) {
    this.memory = new LoopMemory(chunkSize * count, opts);
    for (let i = count - 1; i >= 0; i--) this.free.push(i);
  }

  async acquire(): Promise<{ index: number; buffer: Buffer; offset: number }> {
    const i = this.waiters.length === 0 ? this.free.pop() : undefined;
    const index = i ?? (await new Promise<number>((r) => this.waiters.push(r)));
    const offset = index * this.chunkSize;
    return { index, offset, buffer: this.memory.buffer.subarray(offset, offset + this.chunkSize) };
  }

  release(index: number): void {
    const w = this.waiters.shift();
    if (w) w(index);
    else this.free.push(index);
  }

  close(): void {
    this.memory.close();
  }
}
let nextKey = 1n;

/** Memory the loop's RMA can reach when remote is true (an initiator's pool). */
export class LoopMemory {
  readonly key: bigint;
  readonly buffer: Buffer;
  private closed = false;

  /** Given a Buffer, registers that memory (as a second domain would register the same pages) instead of new memory. */
  constructor(size: number | Buffer, opts: { remote?: boolean } = {}) {
    this.key = nextKey++;
    this.buffer = typeof size === 'number' ? pageAligned(size) : size;
    regions.set(this.key, { buffer: this.buffer, remote: opts.remote ?? false });
  }

  remote(offset = 0, length = this.buffer.length - offset): DataDescriptor {
    return { address: BigInt(offset), key: this.key, length };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    regions.delete(this.key);
  }
}

function resolve(seg: DataDescriptor, op: string): Buffer {
  const r = regions.get(seg.key);
  // The checks a provider makes at the responder: key, access, bounds.
  if (!r || !r.remote) throw new FabricError(13, op, `${op}: no remotely accessible region has key ${seg.key} (FI_EACCES)`, 'FI_EACCES');
  if (seg.address < 0n || seg.address > BigInt(r.buffer.length) || BigInt(seg.length) > BigInt(r.buffer.length) - seg.address)
    throw new FabricError(13, op, `${op}: [${seg.address}, +${seg.length}) is outside the region (FI_EACCES)`, 'FI_EACCES');
  const at = Number(seg.address);
  return r.buffer.subarray(at, at + seg.length);
}

/** RMA read: gathers the remote segments into `into`, in order. */
export async function loopRead(into: Buffer, segments: readonly DataDescriptor[]): Promise<void> {
  await Promise.resolve();
  let at = 0;
  for (const s of segments) {
    const src = resolve(s, 'fi_readmsg');
    if (at + src.length > into.length) throw new FabricError(22, 'fi_readmsg', 'fi_readmsg: local buffer too small', 'FI_EINVAL');
    src.copy(into, at);
    at += src.length;
  }
}

/** RMA write: scatters `from` across the remote segments, in order. */
export async function loopWrite(from: Buffer, segments: readonly DataDescriptor[]): Promise<void> {
  await Promise.resolve();
  let at = 0;
  for (const s of segments) {
    const dst = resolve(s, 'fi_writemsg');
    if (at + dst.length > from.length) throw new FabricError(22, 'fi_writemsg', 'fi_writemsg: local buffer too small', 'FI_EINVAL');
    from.copy(dst, 0, at, at + dst.length);
    at += dst.length;
  }
}

/** One end of an in-process message link. Messages are delivered in order, asynchronously. */
export class LoopEnd {
  onMessage: ((msg: Buffer) => void) | null = null;
  onClose: ((reason: string) => void) | null = null;
  peer: LoopEnd | null = null;
  private closed = false;

  get isClosed(): boolean {
    return this.closed;
  }

  send(msg: Buffer): Promise<void> {
    if (this.closed || !this.peer) return Promise.reject(new FabricError(107, 'fi_send', 'fi_send: not connected (FI_ENOTCONN)', 'FI_ENOTCONN'));
    const copy = Buffer.from(msg);
    const peer = this.peer;
    setImmediate(() => {
      if (!peer.closed) peer.onMessage?.(copy);
    });
    return Promise.resolve();
  }

  close(reason = 'closed'): void {
    if (this.closed) return;
    this.closed = true;
    const peer = this.peer;
    setImmediate(() => {
      this.onClose?.(reason);
      if (peer && !peer.closed) {
        peer.closed = true;
        peer.onClose?.('the peer shut the connection down');
      }
    });
  }
}

type Acceptor = (privateData: Buffer) => { end: LoopEnd; privateData: Buffer } | { reject: Buffer };

const listeners = new Map<string, Acceptor>();

/** Listens under a name (the loop's address). */
export function loopListen(name: string, acceptor: Acceptor): () => void {
  if (listeners.has(name)) throw new FabricError(98, 'fi_listen', `fi_listen: loop address ${name} is in use (FI_EADDRINUSE)`, 'FI_EADDRINUSE');
  listeners.set(name, acceptor);
  return () => listeners.delete(name);
}

/** Connects to a loop listener; rejects like fi_connect does when refused. */
export async function loopConnect(name: string, privateData: Buffer): Promise<{ end: LoopEnd; privateData: Buffer }> {
  await new Promise((r) => setImmediate(r));
  const acceptor = listeners.get(name);
  if (!acceptor) throw new FabricError(111, 'fi_connect', `fi_connect: nothing listens on loop address ${name} (FI_ECONNREFUSED)`, 'FI_ECONNREFUSED');
  const answer = acceptor(privateData);
  if ('reject' in answer) {
    const e = new FabricError(111, 'fi_eq_read', 'connection refused (FI_ECONNREFUSED)', 'FI_ECONNREFUSED');
    (e as FabricError & { privateData?: Buffer }).privateData = answer.reject;
    throw e;
  }
  const mine = new LoopEnd();
  mine.peer = answer.end;
  answer.end.peer = mine;
  return { end: mine, privateData: answer.privateData };
}
