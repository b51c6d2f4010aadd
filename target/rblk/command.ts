// One CMD capsule as the request core's front end (docs/architecture.md
// "Seams"): where its data is (descriptors or immediate data, docs/protocol.md
// §9.1), how it moves (RDMA READ and WRITE through the transport, §12), and
// how it is answered (RSP, §9.3). The life of the command itself is the
// request core's (target/scsi/request/request.ts).
import { DataDirection, DataFormat, remoteDataOf, transferLength, type CommandData, type DataDescriptor } from '../../protocol/wire/index.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import type { DataOffer, RequestFrontEnd, Residuals } from '../scsi/index.js';
import { errorText } from '../error-text.js';
import type { DataBuffer, TargetConnection } from '../transport/transport.js';
import { descriptorRange } from './descriptor-range.js';

/** What a command needs from its session. */
export interface CommandHost<B extends DataBuffer> {
  /** The connection's data calls: all a command moves data with. */
  readonly conn: Pick<TargetConnection<B>, 'allocate' | 'read' | 'write'>;
  /** Sends the command's RSP. */
  respond(tag: bigint, status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void>;
  /**
   * Whether this connection may end a GOOD read with remote CQ data instead
   * of an RSP (protocol version 2 on a transport that carries it, §12.1).
   */
  readonly remoteData: boolean;
  /**
   * Answers the command by its data write (§12.1): its credit comes back as
   * an RSP's would. Returns false when it can no longer be answered (the
   * session ended, or the command was already answered): nothing is then sent.
   */
  answeredByWrite(tag: bigint): boolean;
  /**
   * A failed RMA or send ends the connection (§12): as a connection loss when `cause` says
   * the initiator went away, as a protocol violation otherwise (transport/connection-loss.ts).
   */
  fail(why: string, cause: unknown): void;
}

const NO_DESCRIPTORS: readonly DataDescriptor[] = [];

function descriptorsOf(data: CommandData): readonly DataDescriptor[] {
  switch (data.format) {
    case DataFormat.DIRECT:
      return [data.descriptor];
    case DataFormat.LIST:
      return data.descriptors;
    default:
      return NO_DESCRIPTORS;
  }
}

/** The capsule's direction and data length, in the core's terms. */
export function offerOf(direction: DataDirection, data: CommandData): DataOffer {
  const length = transferLength(data);
  switch (direction) {
    case DataDirection.WRITE:
      return { direction: 'out', length };
    case DataDirection.READ:
      return { direction: 'in', length };
    default:
      return { direction: 'none', length };
  }
}


/** A data-in write held back until the status is known (§12.1). */
interface HeldWrite<B> {
  readonly from: B;
  readonly offset: number;
  readonly remote: readonly DataDescriptor[];
}

export class CapsuleCommand<B extends DataBuffer> implements RequestFrontEnd<B> {
  #held: HeldWrite<B> | null = null;

  constructor(
    private readonly host: CommandHost<B>,
    readonly tag: bigint,
    /** The capsule's data, with immediate data copied out of the receive buffer. */
    private readonly data: CommandData,
  ) {}

  get label(): string {
    return `tag ${this.tag}`;
  }

  allocate(length: number): Promise<B> {
    return this.host.conn.allocate(length);
  }

  async fetchDataOut(into: B, offset: number, length: number): Promise<void> {
    if (this.data.format === DataFormat.IMMEDIATE) {
      this.data.data.copy(into.buffer, offset, offset, offset + length);
      return;
    }
    // Exactly the bytes asked for: a longer offer is an overflow residual, never fetched.
    await this.host.conn.read(into, offset, descriptorRange(descriptorsOf(this.data), offset, length));
  }

  async pushDataIn(from: B, offset: number, length: number): Promise<void> {
    const remote = descriptorRange(descriptorsOf(this.data), offset, length);
    if (!this.host.remoteData) return this.host.conn.write(from, offset, remote);
    // Version 2: the last piece waits for complete(), which knows whether it
    // can carry the GOOD status itself. The request core keeps the buffer
    // until complete() has settled.
    const earlier = this.#held;
    this.#held = { from, offset, remote };
    if (earlier !== null) await this.host.conn.write(earlier.from, earlier.offset, earlier.remote);
  }

  async complete(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    const held = this.#held;
    this.#held = null;
    if (held !== null) {
      // §12.1: GOOD, no sense, no residual: the write's remote data is the answer.
      const good = status === ScsiStatus.GOOD && sense === undefined && residuals.dataIn === 0 && residuals.dataOut === 0;
      try {
        if (good && this.host.answeredByWrite(this.tag)) {
          await this.host.conn.write(held.from, held.offset, held.remote, { remoteData: remoteDataOf(this.tag) });
          return;
        }
        await this.host.conn.write(held.from, held.offset, held.remote);
      } catch (e) {
        // No RSP may follow data that did not go out (§12).
        this.transferFailed('data-in', e);
        return;
      }
    }
    return this.host.respond(this.tag, status, sense, residuals);
  }

  transferFailed(step: 'data-out' | 'data-in', error: unknown): void {
    this.host.fail(`${step === 'data-out' ? 'RDMA READ' : 'RDMA WRITE'} for tag ${this.tag} failed: ${errorText(error)}`, error);
  }
}
