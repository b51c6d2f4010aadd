// Drives the SCSI core the way a transport does: parse, allocate a buffer of
// transferLength, copy data-out in, execute, and decode the completion.
import type { ExecutionContext } from 'ava';
import { decodeSense, type Sense } from '../../../protocol/scsi/sense.js';
import type { SenseCode } from '../../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../../protocol/scsi/status.js';
import { LogicalUnit, type LogicalUnitOptions } from '../../../target/scsi/logical-unit.js';
import type { Access, Nexus } from '../../../target/scsi/nexus.js';
import { parseCommand, type Completion } from '../../../target/scsi/scsi-command.js';
import { MemBackend } from './mem-backend.js';
import { pattern } from '../../../bench/kit/pattern.js';

export const UUID = '6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f';

export function makeLu(
  o: Partial<LogicalUnitOptions> & { sizeBytes?: number; canDiscard?: boolean; backendReadOnly?: boolean } = {},
): { lu: LogicalUnit; backend: MemBackend } {
  const backend = new MemBackend(o.sizeBytes ?? 1024 * 1024, {
    canDiscard: o.canDiscard ?? true,
    readOnly: o.backendReadOnly ?? false,
  });
  const lu = new LogicalUnit({ name: 'vol0', identifier: UUID, ...o, backend });
  return { lu, backend };
}

let sessions = 0;

export function nexus(initiator: string, targetPort?: string): Nexus {
  sessions++;
  return { sessionId: `s${sessions}`, initiator, ...(targetPort === undefined ? {} : { targetPort }) };
}

export interface Result {
  completion: Completion;
  status: number;
  sense?: Sense;
  data: Buffer;
  /** What parse asked the transport to move. */
  direction?: string;
  transferLength?: number;
}

export interface RunOptions {
  out?: Buffer;
  access?: Access;
  luns?: readonly number[];
}

export async function run(lu: LogicalUnit | undefined, n: Nexus, cdb: Buffer, o: RunOptions = {}): Promise<Result> {
  const parsed = parseCommand(cdb, lu, o.access ?? 'rw');
  if (!parsed.ok) return result(parsed.completion, Buffer.alloc(0));
  const cmd = parsed.command;
  const data = Buffer.alloc(cmd.transferLength);
  if (cmd.direction === 'out' && o.out) o.out.copy(data, 0, 0, Math.min(o.out.length, data.length));
  const completion = await cmd.execute({ nexus: n, data, access: o.access ?? 'rw', visibleLuns: o.luns ?? [0] });
  return {
    ...result(completion, data.subarray(0, completion.dataLength)),
    direction: cmd.direction,
    transferLength: cmd.transferLength,
  };
}

function result(completion: Completion, data: Buffer): Result {
  const sense = completion.sense ? decodeSense(completion.sense) : undefined;
  return { completion, status: completion.status, data, ...(sense ? { sense } : {}) };
}

export function assertGood(t: ExecutionContext, r: Result, what = 'command'): void {
  const s = r.sense ? ` (sense ${r.sense.key.toString(16)} ${r.sense.asc.toString(16)}/${r.sense.ascq.toString(16)})` : '';
  t.is(r.status, ScsiStatus.GOOD, `${what}: status 0x${r.status.toString(16)}${s}`);
}

export function assertSense(t: ExecutionContext, r: Result, code: Pick<SenseCode, 'key' | 'asc' | 'ascq'>, what = 'command'): void {
  t.is(r.status, ScsiStatus.CHECK_CONDITION, `${what}: expected CHECK CONDITION`);
  t.truthy(r.sense, `${what}: sense present`);
  if (!r.sense) return;
  t.deepEqual(
    [r.sense.key, r.sense.asc, r.sense.ascq],
    [code.key, code.asc, code.ascq],
    `${what}: sense key/ASC/ASCQ`,
  );
}

export function assertConflict(t: ExecutionContext, r: Result, what = 'command'): void {
  t.is(r.status, ScsiStatus.RESERVATION_CONFLICT, `${what}: expected RESERVATION CONFLICT`);
  t.is(r.completion.sense, undefined, `${what}: no sense with RESERVATION CONFLICT`);
}

/** A logged-in nexus whose first unit attention (29/00) has been consumed. */
export async function ready(t: ExecutionContext, lu: LogicalUnit, initiator: string): Promise<Nexus> {
  const n = nexus(initiator);
  lu.attach(n);
  const r = await run(lu, n, Buffer.from([0, 0, 0, 0, 0, 0]));
  t.is(r.sense?.asc, 0x29, `${initiator}: first command reports POWER ON, RESET`);
  return n;
}

export { pattern };
