// The seam between the request core and a front end, as Linux nvmet's
// nvmet_fabrics_ops sits between its core and each fabric: the core runs the
// life of one SCSI command (request.ts) and asks the front end only to find
// memory, move data and answer. A front end is one wire protocol (rblk's
// capsules today, docs/architecture.md "Seams"); none of its types appear
// here. One front-end object serves one command.
import type { Direction } from '../command-spec.js';
import type { LogicalUnit } from '../logical-unit.js';
import type { Access, Nexus } from '../nexus.js';
import type { SessionIo } from './io-stats.js';
import type { SenseCode } from '../../../protocol/scsi/sense-codes.js';

/**
 * fetchDataOut's rejection when the data-out all came but cannot be used (the
 * transport saw it damaged or out of sequence): unlike a failed transfer, the
 * command still answers, CHECK CONDITION with this sense, nothing written.
 */
export class DataOutUnusable extends Error {
  constructor(
    readonly code: SenseCode,
    message: string,
  ) {
    super(message);
  }
}

/** Memory one command executes against: data-out lands in it, data-in is produced into it. */
export interface RequestBuffer {
  /** Exactly the bytes asked for. */
  readonly buffer: Buffer;
  /** Gives the memory back; the front end may defer it until its own transfers finish. */
  release(): void;
}

/**
 * What the front end's command says about its data before the CDB is parsed:
 * the direction and the expected data transfer length (SAM-5 5.1: the
 * initiator's buffer, whatever the CDB asks for). The core compares it with
 * the CDB and computes the residuals from it.
 */
export interface DataOffer {
  readonly direction: Direction;
  readonly length: number;
  /**
   * A command whose data moves the other way than the offer (a READ offered
   * data-out). 'refuse' (the default): 05 24/00, nothing runs. 'moves-nothing':
   * the command runs as if offered 0 bytes its own way, the smaller of the two
   * transfers (SAM-5 5.5), and the offer's own bytes come back as an underflow
   * residual of their direction, so the initiator sees that none was used.
   */
  readonly otherDirection?: 'refuse' | 'moves-nothing';
}

/**
 * SAM-5 5.5 residuals, one per direction: positive is an underflow (fewer
 * bytes moved than offered), negative an overflow (the command wanted more
 * than was offered), 0 none.
 */
export interface Residuals {
  readonly dataOut: number;
  readonly dataIn: number;
}

/** Where a request runs: one I_T_L nexus as LUN masking gives it to the front end. */
export interface RequestScope {
  readonly nexus: Nexus;
  /** The logical unit behind the LUN, undefined when this nexus may not see one there. */
  readonly lu: LogicalUnit | undefined;
  /** The nexus's access to the logical unit (LUN masking; 'ro' without one). */
  readonly access: Access;
  /** The LUNs this nexus may see, for REPORT LUNS. */
  readonly visibleLuns: readonly number[];
  /** The largest transfer a command may have (limits.max_io); above it, 05 24/00. */
  readonly maxTransfer: number;
  readonly log: RequestLogger;
  /** The session's counters, when the front end keeps them (io-stats.ts). */
  readonly io?: SessionIo;
}

export interface RequestLogger {
  error(message: string, meta?: Record<string, unknown>): void;
}

/**
 * What the core needs from a front end for one command. The core calls the
 * methods in lifecycle order, each at most once today; the offsets let a
 * front end be called for pieces of the transfer. Exactly one of complete()
 * and transferFailed() ends the command, once.
 */
export interface RequestFrontEnd<B extends RequestBuffer> {
  /** How the front end names the command in logs ("tag 7"). */
  readonly label: string;
  /** Memory for `length` bytes (0 included); may wait for it, never fails for want of it. */
  allocate(length: number): Promise<B>;
  /**
   * Fills buffer[offset, offset + length) with the command's data-out, in
   * order: from data that came with the command (rblk immediate data, iSCSI
   * immediate and unsolicited data) or fetched from the initiator (RDMA READ,
   * iSCSI R2T and Data-Out), or both. Rejects when the data cannot be had any
   * more (the connection failed; the command then gets no response), or with
   * DataOutUnusable when it came unusable (the command answers its sense).
   */
  fetchDataOut(buffer: B, offset: number, length: number): Promise<void>;
  /**
   * Sends buffer[offset, offset + length) as data-in at that offset of the
   * initiator's buffer, in one transfer or several (iSCSI Data-In PDUs).
   * When it resolves, a response sent after it reaches the initiator after
   * the data (docs/protocol.md §12). Rejects as fetchDataOut does.
   */
  pushDataIn(buffer: B, offset: number, length: number): Promise<void>;
  /** Sends the command's one response. */
  complete(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void>;
  /** A transfer failed (the rejection of fetchDataOut or pushDataIn): no response can follow. */
  transferFailed(step: 'data-out' | 'data-in', error: unknown): void;
}
