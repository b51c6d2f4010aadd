// An rblk initiator session against the daemon under test, over the tcp
// provider, and the SCSI commands the daemon tests issue, retrying unit
// attentions as an initiator does after reporting them.
import { Connection, type CommandRequest, type CommandResult, type LoginOptions } from '../../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../../initiator/transport/fabric-transport.js';
import * as cdb from '../../../protocol/scsi/cdb.js';
import { parseReadCapacity16, type Capacity16 } from '../../../protocol/scsi/read-capacity.js';
import { parseReportLuns } from '../../../protocol/scsi/report-luns.js';
import { decodeSense, type Sense } from '../../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../../protocol/scsi/status.js';
import { DEFAULT_TARGET_NAME } from '../../../protocol/wire/constants.js';
import { pattern } from '../../../bench/kit/pattern.js';

export const MAX_IO = 128 * 1024;

export async function login(port: number, o: Partial<LoginOptions> = {}): Promise<Connection> {
  return Connection.open(new FabricInitiatorTransport(), {
    address: '127.0.0.1',
    port,
    provider: 'tcp',
    initiatorName: 'iqn.2026-11.io.rblk:test-client',
    targetName: DEFAULT_TARGET_NAME,
    maxIo: MAX_IO,
    queueDepth: 8,
    ...o,
  });
}

export type SenseTriple = { key: number; asc: number; ascq: number };

export function senseOf(r: CommandResult): SenseTriple | undefined {
  const s: Sense | undefined = decodeSense(r.sense);
  return s && { key: s.key, asc: s.asc, ascq: s.ascq };
}

/** Issues a command; a UNIT ATTENTION (key 6) is recorded in `attentions` and the command sent again. */
export async function command(c: Connection, req: CommandRequest, attentions: SenseTriple[] = []): Promise<CommandResult> {
  for (let i = 0; i < 8; i++) {
    const r = await c.command(req);
    const s = r.status === ScsiStatus.CHECK_CONDITION ? senseOf(r) : undefined;
    if (s?.key !== 6) return r;
    attentions.push(s);
  }
  throw new Error('unit attentions kept coming');
}

export async function readCapacity(c: Connection, lun: number): Promise<Capacity16> {
  const buf = await c.allocate(32);
  try {
    const r = await command(c, { lun, cdb: cdb.readCapacity16(32), dataIn: buf });
    if (r.status !== ScsiStatus.GOOD) throw new Error(`READ CAPACITY(16) on LUN ${lun}: status ${r.status} ${JSON.stringify(senseOf(r))}`);
    return parseReadCapacity16(Buffer.from(buf.buffer));
  } finally {
    buf.release();
  }
}

export async function reportLuns(c: Connection, lun = 0): Promise<number[]> {
  const buf = await c.allocate(4096);
  try {
    const r = await command(c, { lun, cdb: cdb.reportLuns(4096), dataIn: buf });
    if (r.status !== ScsiStatus.GOOD) throw new Error(`REPORT LUNS: status ${r.status}`);
    return parseReportLuns(Buffer.from(buf.buffer)).luns;
  } finally {
    buf.release();
  }
}

/** Writes data at lba (512-byte blocks); returns the command's result. */
export async function write(c: Connection, lun: number, lba: number, data: Buffer, o: { fua?: boolean } = {}, attentions?: SenseTriple[]): Promise<CommandResult> {
  const buf = await c.allocate(data.length);
  try {
    data.copy(buf.buffer);
    return await command(c, { lun, cdb: cdb.write16(lba, data.length / 512, { fua: o.fua ?? false }), dataOut: buf }, attentions);
  } finally {
    buf.release();
  }
}

/** Reads blocks at lba; returns the result and a copy of the data. */
export async function read(c: Connection, lun: number, lba: number, blocks: number, attentions?: SenseTriple[]): Promise<{ result: CommandResult; data: Buffer }> {
  const buf = await c.allocate(blocks * 512);
  try {
    const result = await command(c, { lun, cdb: cdb.read16(lba, blocks), dataIn: buf }, attentions);
    return { result, data: Buffer.from(buf.buffer) };
  } finally {
    buf.release();
  }
}

export { pattern };
