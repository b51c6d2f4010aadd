// One CMD capsule as the request core's front end (docs/architecture.md
// "Seams"): where its data is (descriptors or immediate data, docs/protocol.md
// §9.1), how it moves (RDMA READ and WRITE through the transport, §12), and
// how it is answered (RSP, §9.3). The life of the command itself is the
// request core's (target/scsi/request/request.ts).
import { DataDirection, DataFormat, transferLength, type CommandData, type DataDescriptor } from '../../protocol/wire/index.js';
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
  /** A failed RMA ends the session (§12). */
  fail(why: string): void;
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


export class CapsuleCommand<B extends DataBuffer> implements RequestFrontEnd<B> {
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

  pushDataIn(from: B, offset: number, length: number): Promise<void> {
    return this.host.conn.write(from, offset, descriptorRange(descriptorsOf(this.data), offset, length));
  }

  complete(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    return this.host.respond(this.tag, status, sense, residuals);
  }

  transferFailed(step: 'data-out' | 'data-in', error: unknown): void {
    this.host.fail(`${step === 'data-out' ? 'RDMA READ' : 'RDMA WRITE'} for tag ${this.tag} failed: ${errorText(error)}`);
  }
}
