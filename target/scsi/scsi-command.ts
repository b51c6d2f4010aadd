// One command's SCSI part: parse once, execute once, complete once. The
// request core (request/request.ts) calls parseCommand() with the CDB, moves
// data-out into a buffer of transferLength bytes, calls execute(), and has the
// front end send the Completion. Every SCSI error comes back as a Completion;
// execute() never rejects.
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { ALUA_UNAVAILABLE, INTERNAL_TARGET_FAILURE, LOGICAL_UNIT_COMMUNICATION_FAILURE, LOGICAL_UNIT_NOT_SUPPORTED } from '../../protocol/scsi/sense-codes.js';
import { buildSense, type SenseFormat } from '../../protocol/scsi/sense.js';
import { accessRefusal } from './access.js';
import { nacaSet } from './cdb-fields.js';
import { lookupCommand } from './command-table.js';
import type { CommandEntry, CommandIo, Direction, Prepared } from './command-spec.js';
import type { LogicalUnit } from './logical-unit.js';
import { silentLogger } from './logger.js';
import { nexusKey, type Access, type Nexus } from './nexus.js';
import { check, invalidCdb, isFailure, RESERVATION_CONFLICT, TASK_ABORTED, type Outcome } from './outcome.js';
import { CommandAborted } from './range-lock.js';
import { BackendIoError, outcomeForError } from './sense-map.js';

export interface Completion {
  readonly status: number;
  /** Sense bytes for CHECK CONDITION: fixed format, or descriptor format under D_SENSE. */
  readonly sense?: Buffer;
  /** Bytes of data-in produced into the buffer (for the residual count). */
  readonly dataLength: number;
}

export interface ExecContext {
  readonly nexus: Nexus;
  /** At least transferLength bytes; data-out already fetched into it. */
  readonly data: Buffer;
  /** The nexus's access to this LU from LUN masking. */
  readonly access: Access;
  /** LUNs this nexus may see (REPORT LUNS). */
  readonly visibleLuns: readonly number[];
}

export type ParseResult =
  | { readonly ok: true; readonly command: ScsiCommand }
  | { readonly ok: false; readonly completion: Completion };

const EMPTY = Buffer.alloc(0);

function complete(o: Outcome, format: SenseFormat): Completion {
  switch (o.kind) {
    case 'good':
      return { status: o.status ?? ScsiStatus.GOOD, dataLength: o.dataLength };
    case 'status':
      return { status: o.status, dataLength: 0 };
    case 'check':
      return {
        status: ScsiStatus.CHECK_CONDITION,
        sense: buildSense(
          {
            code: o.code,
            ...(o.information === undefined ? {} : { information: o.information }),
            ...(o.fieldPointer === undefined ? {} : { fieldPointer: o.fieldPointer }),
          },
          format,
        ),
        dataLength: 0,
      };
  }
}

export class ScsiCommand {
  readonly name: string;
  readonly opcode: number;
  readonly serviceAction: number | undefined;
  readonly lu: LogicalUnit | undefined;
  readonly direction: Direction;
  /** Data-out bytes to fetch, or the data-in allocation length. */
  readonly transferLength: number;
  /** The offer must equal transferLength (command-spec.ts, exactDataOut). */
  readonly exactDataOut: boolean;
  /** Set for block writes (command-spec.ts): where TRANSFER LENGTH is, to serve a shorter offer. */
  readonly transferLengthField: { readonly at: number; readonly bytes: 2 | 4 } | undefined;
  readonly #entry: CommandEntry;
  readonly #prepared: Prepared;
  #executed = false;

  /** `refused`: answered without data (access.ts), so no data-out length is checked either. */
  constructor(entry: CommandEntry, prepared: Prepared, lu: LogicalUnit | undefined, refused = false) {
    this.name = entry.name;
    this.opcode = entry.opcode;
    this.serviceAction = entry.serviceAction;
    this.lu = lu;
    this.direction = prepared.direction;
    this.transferLength = prepared.transferLength;
    this.exactDataOut = entry.exactDataOut === true && !refused;
    this.transferLengthField = refused ? undefined : entry.transferLengthField;
    this.#entry = entry;
    this.#prepared = prepared;
  }

  /** Runs the command. Calling it twice is a bug in the request core and throws. */
  async execute(ctx: ExecContext): Promise<Completion> {
    if (this.#executed) throw new Error(`${this.name}: execute() called twice`);
    this.#executed = true;
    const format = this.lu?.senseFormat ?? 'fixed';
    return complete(await this.#outcome(ctx), format);
  }

  async #outcome(ctx: ExecContext): Promise<Outcome> {
    const lu = this.lu;
    const entry = this.#entry;
    const key = nexusKey(ctx.nexus);
    if (this.direction !== 'none' && ctx.data.length < this.transferLength) {
      lu?.log.warn('data buffer shorter than the transfer length', {
        command: this.name,
        session: ctx.nexus.sessionId,
        have: ctx.data.length,
        need: this.transferLength,
      });
      return check(INTERNAL_TARGET_FAILURE);
    }
    if (lu) {
      // A pending unit attention is reported before anything else (SAM-5 5.14),
      // except to INQUIRY, REPORT LUNS and REQUEST SENSE.
      if (entry.uaExempt) {
        lu.attentions.touch(key);
      } else {
        const ua = lu.attentions.take(key);
        if (ua) return check(ua);
      }
      // ALUA (SPC-4 5.15.2.4): a standby or unavailable port refuses media access with NOT READY.
      const alua = lu.portGroups?.refusal(entry.alua);
      if (alua) return alua;
      // A store that fenced this gateway out (an RBD image whose cluster blocklisted it,
      // docs/backends.md "Several gateways and stale writes"): this LU is as unavailable
      // through this port as an unavailable port group makes it, and says so the same way.
      if (lu.backend.fenced === true && entry.alua !== 'unavailable') return check(ALUA_UNAVAILABLE);
      // A shared reservation store whose watch broke cannot say who holds the
      // reservation; the commands it governs wait until it has read the state
      // again, and are answered ABORTED COMMAND, which initiators retry, if that
      // takes longer than the store waits (reservation-store.ts).
      if (entry.pr !== 'exempt' && !lu.reservations.current && !(await lu.reservations.whenCurrent())) return check(LOGICAL_UNIT_COMMUNICATION_FAILURE);
      if (lu.reservations.conflicts(key, entry.pr, entry.legacyExempt === true)) return RESERVATION_CONFLICT;
    }
    const io: CommandIo<LogicalUnit | undefined> = {
      lu,
      nexus: ctx.nexus,
      nexusKey: key,
      access: ctx.access,
      data: this.direction === 'none' ? EMPTY : ctx.data,
      visibleLuns: ctx.visibleLuns,
    };
    try {
      if (lu && entry.exclusive === true) return await lu.fastPath.hold(() => this.#prepared.run(io));
      return await this.#prepared.run(io);
    } catch (e) {
      // Its connection was lost and fenced before its range was granted: nothing ran.
      if (e instanceof CommandAborted) return TASK_ABORTED;
      const meta = {
        command: this.name,
        lu: lu?.name,
        session: ctx.nexus.sessionId,
        ...(e instanceof BackendIoError ? { op: e.kind, code: e.code } : {}),
        error: e instanceof Error ? e.message : String(e),
      };
      (lu?.log ?? silentLogger).warn('command failed', meta);
      return outcomeForError(e);
    }
  }
}

/**
 * The answer to a READ or WRITE that the native fast path started and the
 * backend failed with `errno` (docs/target.md "Fast path"): the same table
 * (sense-map.ts) and the same log line as a command that failed here.
 */
export function backendFailure(lu: LogicalUnit, kind: 'read' | 'write', code: string, session: string): Completion {
  const cause = Object.assign(new Error(`${kind} failed: ${code}`), { code });
  const e = new BackendIoError(kind, cause);
  lu.log.warn('command failed', { command: kind === 'read' ? 'READ' : 'WRITE', lu: lu.name, session, op: kind, code, error: e.message, fastPath: true });
  return complete(outcomeForError(e), lu.senseFormat);
}

/**
 * Parses a CDB for a logical unit (undefined when no LU sits at that LUN),
 * for a nexus granted `access` to it by LUN masking. Checks that need no
 * nexus state happen here, before the front end fetches any data-out: opcode,
 * the access the command needs (the only place it is decided: access.ts),
 * CDB fields, LBA range, limits.
 */
export function parseCommand(cdb: Buffer, lu: LogicalUnit | undefined, access: Access): ParseResult {
  const format = lu?.senseFormat ?? 'fixed';
  const fail = (o: Outcome): ParseResult => ({ ok: false, completion: complete(o, format) });
  if (cdb.length === 0) return fail(check(INTERNAL_TARGET_FAILURE));
  const entry = lookupCommand(cdb);
  // For a LUN without a logical unit, only INQUIRY, REPORT LUNS and REQUEST
  // SENSE are answered; anything else is LOGICAL UNIT NOT SUPPORTED (SPC-5 4.6.3).
  if (!lu && (isFailure(entry) || !entry.anyLun)) return fail(check(LOGICAL_UNIT_NOT_SUPPORTED));
  if (isFailure(entry)) return fail(entry);
  if (cdb.length < entry.cdbLength) return fail(invalidCdb(cdb.length));
  if (nacaSet(cdb, entry.cdbLength)) return fail(invalidCdb(entry.cdbLength - 1, 2));
  const refused = lu && accessRefusal(entry.access, access, lu.readOnly, lu.modes.swp);
  if (refused) {
    // Refused, but answered at execute: a pending unit attention or a
    // reservation conflict comes first (SAM-5 5.14), as for any command. No
    // data moves: the data-out of a refused write is never fetched.
    return { ok: true, command: new ScsiCommand(entry, { direction: 'none', transferLength: 0, run: () => refused }, lu, true) };
  }
  const prepared = entry.prepare(cdb, lu);
  if (isFailure(prepared)) return fail(prepared);
  return { ok: true, command: new ScsiCommand(entry, prepared, lu) };
}
