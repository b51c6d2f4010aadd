// The seam between the initiator's session layer and the fabric: connect with
// private data, move capsules, and hand out memory the target may RDMA into or
// out of (the initiator's I/O pool, registered for remote access).
import type { EndpointWakeups } from '../../native/binding.js';
import type { InitiatorQueue, InitiatorQueueOptions } from '../../native/initiator-queue.js';
import type { ConnectAcceptData, DataDescriptor } from '../../protocol/wire/index.js';

/** Registered, remote-accessible memory for one command's data (or a user's zero-copy buffer). */
export interface IoBuffer {
  readonly buffer: Buffer;
  /** The descriptor(s) naming buffer[offset, offset+length) to the target. */
  segments(offset?: number, length?: number): DataDescriptor[];
  /** Where buffer[0] is for the target, when the buffer is one region (the native queue's descriptors). */
  readonly base?: Readonly<Pick<DataDescriptor, 'address' | 'key'>>;
  release(): void;
}

export interface InitiatorConnection {
  readonly provider: string;
  /** The target's ACCEPT: its receive buffer size and count. */
  readonly accept: ConnectAcceptData;
  /** The connection's protocol version, as the ACCEPT echoed it (docs/protocol.md §3). */
  readonly version: number;
  /**
   * Called with the 32 bits of remote CQ data of each of the target's writes
   * that carried some (version 2: a read answered by its data, §12.1).
   */
  onRemoteData: ((data: number) => void) | null;
  /** Called once per received capsule with exactly its bytes; valid until the handler returns. */
  onCapsule: ((capsule: Buffer) => void) | null;
  onClose: ((reason: string) => void) | null;
  send(capsule: Buffer): Promise<void>;
  /**
   * Remote-accessible memory from the connection's I/O pool; waits when it is
   * busy. Rejects with MemoryReleased (a TransportError) once the pool is closed.
   */
  allocate(length: number): Promise<IoBuffer>;
  /**
   * Registers the session's memory (transport.memory()) on this connection for
   * remote access: a user's zero-copy buffer. The registration ends with the
   * connection (or release()); the memory and its views stay the session's
   * (docs/architecture.md "Memory").
   */
  register(memory: SessionMemory): IoBuffer;
  /**
   * The native command queue for READ and WRITE on registered memory
   * (native/initiator-queue.ts), where the transport has one; it shares the
   * endpoint's completion queue and the connection's credits.
   */
  attachQueue?(opts: InitiatorQueueOptions): InitiatorQueue;
  /** How often the endpoint woke and spun (busy polling), where the transport has an endpoint. */
  readonly wakeups?: EndpointWakeups;
  close(): Promise<void>;
}

export interface ConnectOptions {
  address: string;
  port: number;
  provider?: string;
  /** Largest capsule this side sends, and the queue depth it asks for. */
  maxCapsule: number;
  queueDepth: number;
  /** Receive buffers posted before connecting: queue depth + 3 of this size (the maxTiCapsule asked for). */
  receiveSize: number;
  /** Bytes of I/O pool (largest I/O × depth, typically). */
  ioPoolSize: number;
  ioChunkSize: number;
  timeoutMs?: number;
  /** The highest protocol version to ask for (default: PROTOCOL_VERSION); lower when the target refuses it (§3). */
  protocolVersion?: number;
  /** Spin on the completion queue this long before the loop sleeps (the public option's; 0 or absent: never). */
  busyPollMicros?: number;
}

export interface InitiatorTransport {
  readonly name: 'fabric' | 'loop';
  connect(opts: ConnectOptions): Promise<InitiatorConnection>;
  /** Page-aligned memory of no connection, for zero-copy buffers that every connection registers (InitiatorConnection.register). */
  memory(size: number): SessionMemory;
}

/** Memory a session owns across its connections; each connection that carries its I/O registers it. */
export interface SessionMemory {
  /** The bytes; empty once freed. */
  readonly buffer: Buffer;
  /** Detaches every view; registrations still open keep the pages until they close. */
  free(): void;
}
