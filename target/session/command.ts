// One CMD from capsule to RSP, in the order of docs/protocol.md §12 and of
// SPDK's request states: parse the CDB once, take a data buffer from the
// pool (waiting if need be), fetch data-out by RDMA READ or from the capsule,
// execute, push data-in by RDMA WRITE, respond exactly once. Every step checks
// for an abort first, so an aborted command never touches the initiator's
// memory after its TASK ABORTED response.
import { buildSense } from '../../protocol/scsi/sense.js';
import { INVALID_FIELD_IN_CDB, LOGICAL_UNIT_NOT_SUPPORTED } from '../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { DataDirection, DataFormat, type CommandCapsule } from '../../protocol/wire/index.js';
import type { Nexus, ScsiTarget } from '../scsi/index.js';
import { trimSegments, type DataBuffer, type RemoteSegment, type TargetConnection } from '../transport/transport.js';
import type { MappedLun, SessionLogger } from './environment.js';

export interface CommandState {
  readonly tag: bigint;
  readonly lun: number;
  /** Set by task management or session end; checked before every step. */
  aborted: boolean;
  /** Settles when the command has responded (or given up). */
  done: Promise<void>;
}

export interface CommandContext {
  conn: TargetConnection;
  scsi: ScsiTarget;
  nexus: Nexus;
  mapped: MappedLun | undefined;
  visibleLuns: readonly number[];
  maxIo: number;
  log: SessionLogger;
  /**
   * Sends the RSP once. Residuals follow SRP: positive = underflow (fewer bytes
   * moved than the descriptors offered), negative = overflow.
   */
  respond(status: number, sense: Buffer | undefined, dataLength: number, dataOutResidual: number, dataInResidual: number): Promise<void>;
  /** A fabric failure on this connection ends the session (§12). */
  fatal(why: string): void;
}

function segmentsOf(cmd: CommandCapsule): RemoteSegment[] {
  switch (cmd.data.format) {
    case DataFormat.DIRECT:
      return [cmd.data.descriptor];
    case DataFormat.LIST:
      return cmd.data.descriptors;
    default:
      return [];
  }
}

function offered(cmd: CommandCapsule): number {
  switch (cmd.data.format) {
    case DataFormat.NONE:
      return 0;
    case DataFormat.IMMEDIATE:
      return cmd.data.data.length;
    case DataFormat.DIRECT:
      return cmd.data.descriptor.length;
    case DataFormat.LIST:
      return cmd.data.descriptors.reduce((n, d) => n + d.length, 0);
  }
}

const checkCondition = (code: Parameters<typeof buildSense>[0]['code']): Buffer => buildSense({ code });

export async function runCommand(cmd: CommandCapsule, state: CommandState, ctx: CommandContext): Promise<void> {
  const L = offered(cmd);
  let data: DataBuffer | null = null;
  try {
    if (!ctx.mapped && cmd.cdb[0] !== 0x12 && cmd.cdb[0] !== 0xa0 && cmd.cdb[0] !== 0x03) {
      // A LUN this initiator cannot see: only INQUIRY, REPORT LUNS and REQUEST SENSE answer (SPC-5 4.5).
      // Only the command's own direction has a residual (docs/protocol.md §9.3).
      return await ctx.respond(ScsiStatus.CHECK_CONDITION, checkCondition(LOGICAL_UNIT_NOT_SUPPORTED), 0, cmd.direction === DataDirection.WRITE ? L : 0, cmd.direction === DataDirection.READ ? L : 0);
    }
    const parsed = ctx.scsi.parse(cmd.cdb, ctx.mapped?.lu, ctx.mapped?.access ?? 'ro');
    if (!parsed.ok) return await ctx.respond(parsed.completion.status, parsed.completion.sense, 0, cmd.direction === DataDirection.WRITE ? L : 0, cmd.direction === DataDirection.READ ? L : 0);
    const sc = parsed.command;
    const want = sc.transferLength;
    // The capsule's direction must match the command's (SAM-5: no bidirectional here).
    const dirOk =
      (sc.direction === 'none' && (want === 0 || cmd.direction !== DataDirection.WRITE)) ||
      (sc.direction === 'out' && cmd.direction === DataDirection.WRITE) ||
      (sc.direction === 'in' && cmd.direction === DataDirection.READ) ||
      want === 0;
    if (!dirOk || want > ctx.maxIo) {
      return await ctx.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INVALID_FIELD_IN_CDB), 0, cmd.direction === DataDirection.WRITE ? L : 0, cmd.direction === DataDirection.READ ? L : 0);
    }
    if (sc.direction === 'out' && L < want) {
      // Fewer bytes offered than the CDB transfers: refuse rather than write a partial buffer.
      return await ctx.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INVALID_FIELD_IN_CDB), 0, L, 0);
    }

    data = await ctx.conn.allocate(want);
    if (state.aborted) return await ctx.respond(ScsiStatus.TASK_ABORTED, undefined, 0, 0, 0);

    if (sc.direction === 'out' && want > 0) {
      if (cmd.data.format === DataFormat.IMMEDIATE) cmd.data.data.copy(data.buffer, 0, 0, want);
      else {
        // Fetch exactly `want` bytes: trim the descriptor list (a longer offer is an overflow residual).
        try {
          await ctx.conn.read(data, trimSegments(segmentsOf(cmd), want));
        } catch (e) {
          ctx.fatal(`RDMA READ for tag ${cmd.tag} failed: ${(e as Error).message}`);
          return;
        }
      }
    }
    if (state.aborted) return await ctx.respond(ScsiStatus.TASK_ABORTED, undefined, 0, 0, 0);

    const done = await ctx.scsi.execute(sc, { nexus: ctx.nexus, data: data.buffer, access: ctx.mapped?.access ?? 'ro', visibleLuns: ctx.visibleLuns });
    if (state.aborted) return await ctx.respond(ScsiStatus.TASK_ABORTED, undefined, 0, 0, 0);

    let inResidual = 0;
    let outResidual = 0;
    if (sc.direction === 'in') {
      const n = Math.min(done.dataLength, L);
      if (n > 0) {
        try {
          await ctx.conn.write(data, n, segmentsOf(cmd));
        } catch (e) {
          ctx.fatal(`RDMA WRITE for tag ${cmd.tag} failed: ${(e as Error).message}`);
          return;
        }
      }
      inResidual = done.dataLength > L ? -(done.dataLength - L) : L - n;
    } else if (cmd.direction === DataDirection.WRITE) {
      outResidual = L - want;
    }
    await ctx.respond(done.status, done.sense, done.dataLength, outResidual, inResidual);
  } catch (e) {
    // Nothing SCSI throws (the core maps errors to sense); this is a bug or a
    // vanished connection. Answer HARDWARE ERROR rather than leave the tag hanging.
    ctx.log.error(`command tag ${cmd.tag} failed unexpectedly: ${(e as Error).stack ?? String(e)}`);
    await ctx.respond(ScsiStatus.CHECK_CONDITION, buildSense({ code: { key: 0x04, asc: 0x44, ascq: 0x00 } }), 0, 0, 0).catch(() => undefined);
  } finally {
    data?.release();
  }
}
