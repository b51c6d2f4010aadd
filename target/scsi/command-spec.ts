// How one command is described in the command table, as tgt's sbc.c and
// spc.c describe theirs: opcode (and service action), how it is parsed, how it
// runs, and the facts the lifecycle needs (data direction, reservation class,
// unit-attention treatment, the access it needs, REPORT SUPPORTED OPERATION
// CODES usage data).
import { LOGICAL_UNIT_NOT_SUPPORTED } from '../../protocol/scsi/sense-codes.js';
import type { LogicalUnit } from './logical-unit.js';
import type { RequiredAccess } from './access.js';
import type { Access, Nexus } from './nexus.js';
import { check, type Failure, type Outcome } from './outcome.js';
import type { AluaServed } from './port-groups.js';
import type { PrClass } from './reservations/reservations.js';

export type Direction = 'none' | 'in' | 'out';

/** A parsed CDB: what the front end must move, and the handler's own fields. */
export interface Parsed<P> {
  readonly direction: Direction;
  /** Bytes of data-out to fetch, or the data-in allocation length. */
  readonly transferLength: number;
  readonly params: P;
}

/** What a handler may touch while it runs. */
export interface CommandIo<L extends LogicalUnit | undefined = LogicalUnit> {
  readonly lu: L;
  readonly nexus: Nexus;
  readonly nexusKey: string;
  readonly access: Access;
  /** Memory from the front end: data-out to read, or data-in to fill. */
  readonly data: Buffer;
  /** The LUNs this nexus may see, for REPORT LUNS. */
  readonly visibleLuns: readonly number[];
}

interface SpecBase {
  readonly opcode: number;
  readonly serviceAction?: number;
  readonly name: string;
  readonly cdbLength: number;
  /** CDB USAGE DATA (SPC-5 6.35.3): byte 0 is the opcode, set bits are evaluated. */
  readonly usage: readonly number[];
  readonly pr: PrClass;
  /** INQUIRY, REPORT LUNS and REQUEST SENSE are not blocked by a unit attention (SAM-5 5.14). */
  readonly uaExempt?: boolean;
  /** Allowed to a nexus that does not hold a RESERVE(6) reservation (SPC-2 5.5.1). */
  readonly legacyExempt?: boolean;
  /**
   * The data-out is a structure the CDB sizes exactly (WRITE SAME's one block,
   * COMPARE AND WRITE's verify and write halves): an offer of any other length
   * means the initiator built a different command, and it is refused rather
   * than split at the wrong place (request/request.ts).
   */
  readonly exactDataOut?: boolean;
  /**
   * Where a block write's TRANSFER LENGTH lives (byte offset and width), so a
   * data-out offer of fewer whole blocks can be served as the shorter write it
   * covers (SAM-5 5.5: the smaller of the two moves; request/request.ts).
   */
  readonly transferLengthField?: { readonly at: number; readonly bytes: 2 | 4 };
  /**
   * What the command needs from the nexus's access (access.ts): 'write' and
   * 'shared-state' are refused on a read-only LU and under 'ro' access.
   * Required, so a command cannot enter the table without a decision.
   */
  readonly access: RequiredAccess;
  /**
   * Down to which ALUA state the command is still answered (port-groups.ts,
   * SPC-4 5.15.2.4): absent means media access, refused in standby (04/0B)
   * and unavailable (04/0C).
   */
  readonly alua?: AluaServed;
  /**
   * Runs with the LU's native fast path held off (fast-path-gate.ts): the
   * command changes what a READ or WRITE would answer (a reservation, the
   * write cache), or needs blocks to itself (COMPARE AND WRITE).
   */
  readonly exclusive?: boolean;
}

/** A command that needs a logical unit. */
export interface LuCommandSpec<P> extends SpecBase {
  readonly anyLun?: false;
  parse(cdb: Buffer, lu: LogicalUnit): Parsed<P> | Failure;
  execute(p: P, io: CommandIo<LogicalUnit>): Promise<Outcome> | Outcome;
}

/** A command answered for any LUN, with or without a logical unit behind it. */
export interface AnyLunCommandSpec<P> extends SpecBase {
  readonly anyLun: true;
  parse(cdb: Buffer, lu: LogicalUnit | undefined): Parsed<P> | Failure;
  execute(p: P, io: CommandIo<LogicalUnit | undefined>): Promise<Outcome> | Outcome;
}

/**
 * The commands an initiator needs whatever state the LUN is in, to find out
 * that state (SAM-5 5.14, SPC-5 5.15.2.4, SPC-2 5.5.1): INQUIRY, REPORT LUNS
 * and REQUEST SENSE are answered for any LUN, past a unit attention, a
 * reservation and any ALUA state, and touch no data.
 */
export const ANSWERED_IN_ANY_STATE = {
  pr: 'exempt',
  access: 'read',
  alua: 'unavailable',
  uaExempt: true,
  legacyExempt: true,
  anyLun: true,
} as const;

/** A parsed command with its handler's parameters closed over. */
export interface Prepared {
  readonly direction: Direction;
  readonly transferLength: number;
  run(io: CommandIo<LogicalUnit | undefined>): Promise<Outcome> | Outcome;
}

/** A table entry with the parameter type erased. */
export interface CommandEntry extends SpecBase {
  readonly anyLun: boolean;
  prepare(cdb: Buffer, lu: LogicalUnit | undefined): Prepared | Failure;
}

function isFailureResult<P>(r: Parsed<P> | Failure): r is Failure {
  return 'kind' in r;
}

export function defineCommand<P>(spec: LuCommandSpec<P> | AnyLunCommandSpec<P>): CommandEntry {
  const prepare = (cdb: Buffer, lu: LogicalUnit | undefined): Prepared | Failure => {
    if (spec.anyLun === true) {
      const r = spec.parse(cdb, lu);
      if (isFailureResult(r)) return r;
      return { direction: r.direction, transferLength: r.transferLength, run: (io) => spec.execute(r.params, io) };
    }
    if (lu === undefined) return check(LOGICAL_UNIT_NOT_SUPPORTED);
    const r = spec.parse(cdb, lu);
    if (isFailureResult(r)) return r;
    return {
      direction: r.direction,
      transferLength: r.transferLength,
      run: (io) => spec.execute(r.params, { ...io, lu }),
    };
  };
  return { ...spec, anyLun: spec.anyLun === true, prepare };
}

/** TRANSFER LENGTH of the 10-, 12- and 16-byte READ/WRITE layouts (SBC-4 5.x). */
export function blockLengthField(cdbLength: number): { at: number; bytes: 2 | 4 } | undefined {
  if (cdbLength === 10) return { at: 7, bytes: 2 };
  if (cdbLength === 12) return { at: 6, bytes: 4 };
  if (cdbLength === 16) return { at: 10, bytes: 4 };
  return undefined;
}

export function noData<P>(params: P): Parsed<P> {
  return { direction: 'none', transferLength: 0, params };
}

export function dataIn<P>(transferLength: number, params: P): Parsed<P> {
  return { direction: transferLength > 0 ? 'in' : 'none', transferLength, params };
}

export function dataOut<P>(transferLength: number, params: P): Parsed<P> {
  return { direction: transferLength > 0 ? 'out' : 'none', transferLength, params };
}
