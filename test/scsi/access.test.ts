// Access by command (docs/target.md, "Access by command"): every entry of the
// opcode table declares what it needs, and a read-only initiator, or any
// initiator of a read-only LU, runs 'read' commands only. The table is walked
// whole, so a command added without a sample and a declared access fails here.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import test, { type ExecutionContext } from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { findModePage, modeSelectList10, modeSelectList6, parseCachingPage, parseControlPage, parseModeSense10 } from '../../protocol/scsi/mode.js';
import { MaintenanceIn, ModePage, Opcode, PrInAction, PrOutAction, PrType, ServiceActionIn16 } from '../../protocol/scsi/opcodes.js';
import { ALUA_STANDBY, ALUA_UNAVAILABLE, WRITE_PROTECTED } from '../../protocol/scsi/sense-codes.js';
import type { AluaState } from '../../protocol/scsi/target-port-groups.js';
import { TargetPortGroups, type PortGroupsConfig } from '../../target/scsi/port-groups.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { REQUIRED_ACCESS } from '../../target/scsi/access.js';
import { COMMANDS } from '../../target/scsi/command-table.js';
import type { CommandEntry } from '../../target/scsi/command-spec.js';
import type { LogicalUnit } from '../../target/scsi/logical-unit.js';
import { nexusKey, type Access, type Nexus } from '../../target/scsi/nexus.js';
import { assertGood, assertSense, makeLu, pattern, ready, run, type Result } from './helpers/harness.js';
import type { MemBackend } from './helpers/mem-backend.js';

interface Sample {
  cdb: Buffer;
  out?: Buffer;
}

interface Bench {
  lu: LogicalUnit;
  backend: MemBackend;
  /** The nexus under test. */
  n: Nexus;
  /** Another nexus on the same LU: what "everyone else" sees. */
  other: Nexus;
}

/** Runs as a read-write nexus, to put the LU in the state the sample needs. */
const setup = (b: Bench, who: Nexus, c: Buffer, out?: Buffer): Promise<Result> => run(b.lu, who, c, { access: 'rw', ...(out ? { out } : {}) });

const KEY_A = 0xaan;
const KEY_B = 0xbbn;
const prList = (key: bigint, serviceActionKey = 0n): Buffer => cdb.prOutParameterList({ key, serviceActionKey });

async function currentPage(b: Bench, page: number): Promise<Buffer> {
  const r = await setup(b, b.n, cdb.modeSense10({ page, allocationLength: 255, dbd: true }));
  const p = findModePage(parseModeSense10(r.data), page);
  if (!p) throw new Error(`MODE SENSE returned no page ${page}`);
  return Buffer.from(p);
}

/** The caching page with WCE flipped: a real change MODE SELECT would make. */
async function flippedCaching(b: Bench): Promise<Buffer> {
  const p = await currentPage(b, ModePage.CACHING);
  p[2] ^= 0x04;
  return p;
}

const BLOCK = 512;

/**
 * One valid command per table entry, keyed by opcode and service action. Each
 * run as a read-write nexus succeeds; 'write' and 'shared-state' ones change
 * what other initiators see (checked below), 'read' ones do not.
 */
const SAMPLES = new Map<string, (b: Bench) => Promise<Sample> | Sample>([
  [key(Opcode.TEST_UNIT_READY), () => ({ cdb: cdb.testUnitReady() })],
  [key(Opcode.REQUEST_SENSE), () => ({ cdb: cdb.requestSense() })],
  [key(Opcode.INQUIRY), () => ({ cdb: cdb.inquiry(96) })],
  [key(Opcode.REPORT_LUNS), () => ({ cdb: cdb.reportLuns(64) })],
  [key(Opcode.MODE_SENSE_6), () => ({ cdb: cdb.modeSense6({ page: ModePage.ALL, allocationLength: 255 }) })],
  [key(Opcode.MODE_SENSE_10), () => ({ cdb: cdb.modeSense10({ page: ModePage.ALL, allocationLength: 255 }) })],
  [
    key(Opcode.MODE_SELECT_6),
    async (b) => {
      const list = modeSelectList6([await flippedCaching(b)]);
      return { cdb: cdb.modeSelect6(list.length), out: list };
    },
  ],
  [
    key(Opcode.MODE_SELECT_10),
    async (b) => {
      const control = await currentPage(b, ModePage.CONTROL);
      control[2] |= 0x04; // D_SENSE
      const list = modeSelectList10([await flippedCaching(b), control]);
      return { cdb: cdb.modeSelect10(list.length), out: list };
    },
  ],
  [key(Opcode.START_STOP_UNIT), () => ({ cdb: cdb.startStopUnit(true) })],
  [key(Opcode.PREVENT_ALLOW_MEDIUM_REMOVAL), () => ({ cdb: cdb.preventAllowMediumRemoval(false) })],
  [key(Opcode.READ_CAPACITY_10), () => ({ cdb: cdb.readCapacity10() })],
  [key(Opcode.SERVICE_ACTION_IN_16, ServiceActionIn16.READ_CAPACITY_16), () => ({ cdb: cdb.readCapacity16() })],
  [key(Opcode.SERVICE_ACTION_IN_16, ServiceActionIn16.GET_LBA_STATUS), () => ({ cdb: cdb.getLbaStatus(0, 64) })],
  [key(Opcode.READ_6), () => ({ cdb: cdb.read6(0, 1) })],
  [key(Opcode.READ_10), () => ({ cdb: cdb.read10(0, 1) })],
  [key(Opcode.READ_12), () => ({ cdb: cdb.read12(0, 1) })],
  [key(Opcode.READ_16), () => ({ cdb: cdb.read16(0, 1) })],
  [key(Opcode.WRITE_6), () => ({ cdb: cdb.write6(0, 1), out: pattern(BLOCK, 6) })],
  [key(Opcode.WRITE_10), () => ({ cdb: cdb.write10(0, 1), out: pattern(BLOCK, 10) })],
  [key(Opcode.WRITE_12), () => ({ cdb: cdb.write12(0, 1), out: pattern(BLOCK, 12) })],
  [key(Opcode.WRITE_16), () => ({ cdb: cdb.write16(0, 1), out: pattern(BLOCK, 16) })],
  [key(Opcode.SYNCHRONIZE_CACHE_10), () => ({ cdb: cdb.synchronizeCache10() })],
  [key(Opcode.SYNCHRONIZE_CACHE_16), () => ({ cdb: cdb.synchronizeCache16() })],
  [key(Opcode.PRE_FETCH_10), () => ({ cdb: cdb.prefetch10() })],
  [key(Opcode.PRE_FETCH_16), () => ({ cdb: cdb.prefetch16() })],
  [key(Opcode.WRITE_SAME_10), () => ({ cdb: cdb.writeSame10(0, 4), out: pattern(BLOCK, 41) })],
  [key(Opcode.WRITE_SAME_16), () => ({ cdb: cdb.writeSame16(0, 4), out: pattern(BLOCK, 93) })],
  [
    key(Opcode.UNMAP),
    (b) => {
      // Something to deallocate, put straight into the backend (the LU may be read-only).
      pattern(8 * BLOCK, 42).copy(b.backend.bytes, 0);
      const list = cdb.unmapParameterList([{ lba: 0, blocks: 8 }]);
      return { cdb: cdb.unmap(list.length), out: list };
    },
  ],
  [key(Opcode.COMPARE_AND_WRITE), () => ({ cdb: cdb.compareAndWrite(0, 1), out: Buffer.concat([Buffer.alloc(BLOCK), pattern(BLOCK, 89)]) })],
  [
    key(Opcode.ORWRITE_16),
    () => {
      const c = Buffer.alloc(16);
      c[0] = Opcode.ORWRITE_16;
      c.writeUInt32BE(1, 10);
      return { cdb: c, out: Buffer.alloc(BLOCK, 0x8b) };
    },
  ],
  // One physical block (4 KiB): WRITE ATOMIC's alignment and granularity (VPD B0h).
  [key(Opcode.WRITE_ATOMIC_16), () => ({ cdb: cdb.writeAtomic16(0, 4096 / BLOCK), out: pattern(4096, 0x9c) })],
  [
    key(Opcode.EXTENDED_COPY, 0),
    (b) => {
      pattern(4 * BLOCK, 83).copy(b.backend.bytes, 0);
      const list = cdb.extendedCopyList({ listId: 1, targets: [b.lu.naa], blockSize: BLOCK, segments: [{ blocks: 4, srcLba: 0, dstLba: 64 }] });
      return { cdb: cdb.extendedCopy(list.length), out: list };
    },
  ],
  [key(Opcode.RECEIVE_COPY_RESULTS, 3), () => ({ cdb: cdb.receiveCopyResults(3, 0, 1024) })],
  [
    key(Opcode.RECEIVE_COPY_RESULTS, 0),
    (b) => {
      // The result of an earlier copy of this nexus's, as EXTENDED COPY holds it.
      b.lu.copyResults.hold(nexusKey(b.n), 9, { status: 1, segmentsProcessed: 1, bytes: 4 * BLOCK });
      return { cdb: cdb.receiveCopyResults(0, 9, 1024) };
    },
  ],
  [key(Opcode.READ_DEFECT_DATA_10), () => ({ cdb: Buffer.from([Opcode.READ_DEFECT_DATA_10, 0, 0x18, 0, 0, 0, 0, 0, 32, 0]) })],
  [key(Opcode.READ_DEFECT_DATA_12), () => ({ cdb: Buffer.from([Opcode.READ_DEFECT_DATA_12, 0x18, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]) })],
  [key(Opcode.VERIFY_10), () => ({ cdb: cdb.verify10(0, 1) })],
  [key(Opcode.VERIFY_12), () => ({ cdb: cdb.verify12(0, 1) })],
  [key(Opcode.VERIFY_16), () => ({ cdb: cdb.verify16(0, 1) })],
  [key(Opcode.WRITE_AND_VERIFY_10), () => ({ cdb: cdb.writeAndVerify10(0, 1), out: pattern(BLOCK, 0x2e) })],
  [key(Opcode.WRITE_AND_VERIFY_12), () => ({ cdb: cdb.writeAndVerify12(0, 1), out: pattern(BLOCK, 0xae) })],
  [key(Opcode.WRITE_AND_VERIFY_16), () => ({ cdb: cdb.writeAndVerify16(0, 1), out: pattern(BLOCK, 0x8e) })],
  [key(Opcode.RESERVE_6), () => ({ cdb: cdb.reserve6() })],
  [
    key(Opcode.RELEASE_6),
    async (b) => {
      await setup(b, b.n, cdb.reserve6());
      return { cdb: cdb.release6() };
    },
  ],
  ...[PrInAction.READ_KEYS, PrInAction.READ_RESERVATION, PrInAction.REPORT_CAPABILITIES, PrInAction.READ_FULL_STATUS].map(
    (sa): [string, () => Sample] => [key(Opcode.PERSISTENT_RESERVE_IN, sa), () => ({ cdb: cdb.persistentReserveIn(sa, 1024) })],
  ),
  [key(Opcode.PERSISTENT_RESERVE_OUT, PrOutAction.REGISTER), () => ({ cdb: cdb.persistentReserveOut(PrOutAction.REGISTER), out: prList(0n, KEY_A) })],
  [
    key(Opcode.PERSISTENT_RESERVE_OUT, PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY),
    () => ({ cdb: cdb.persistentReserveOut(PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY), out: prList(0n, KEY_A) }),
  ],
  [
    key(Opcode.PERSISTENT_RESERVE_OUT, PrOutAction.RESERVE),
    async (b) => {
      await setup(b, b.n, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_A));
      return { cdb: cdb.persistentReserveOut(PrOutAction.RESERVE, PrType.EXCLUSIVE_ACCESS), out: prList(KEY_A) };
    },
  ],
  [
    key(Opcode.PERSISTENT_RESERVE_OUT, PrOutAction.RELEASE),
    async (b) => {
      await setup(b, b.n, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_A));
      await setup(b, b.n, cdb.persistentReserveOut(PrOutAction.RESERVE, PrType.WRITE_EXCLUSIVE), prList(KEY_A));
      return { cdb: cdb.persistentReserveOut(PrOutAction.RELEASE, PrType.WRITE_EXCLUSIVE), out: prList(KEY_A) };
    },
  ],
  [
    key(Opcode.PERSISTENT_RESERVE_OUT, PrOutAction.CLEAR),
    async (b) => {
      await setup(b, b.n, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_A));
      await setup(b, b.other, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_B));
      return { cdb: cdb.persistentReserveOut(PrOutAction.CLEAR), out: prList(KEY_A) };
    },
  ],
  ...[PrOutAction.PREEMPT, PrOutAction.PREEMPT_AND_ABORT].map((sa): [string, (b: Bench) => Promise<Sample>] => [
    key(Opcode.PERSISTENT_RESERVE_OUT, sa),
    async (b) => {
      await setup(b, b.n, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_A));
      await setup(b, b.other, cdb.persistentReserveOut(PrOutAction.REGISTER), prList(0n, KEY_B));
      await setup(b, b.other, cdb.persistentReserveOut(PrOutAction.RESERVE, PrType.WRITE_EXCLUSIVE), prList(KEY_B));
      return { cdb: cdb.persistentReserveOut(sa, PrType.WRITE_EXCLUSIVE), out: prList(KEY_A, KEY_B) };
    },
  ]),
  [key(Opcode.MAINTENANCE_IN, MaintenanceIn.REPORT_SUPPORTED_OPERATION_CODES), () => ({ cdb: cdb.reportSupportedOperationCodes({ allocationLength: 4096 }) })],
  [key(Opcode.MAINTENANCE_IN, MaintenanceIn.REPORT_TARGET_PORT_GROUPS), () => ({ cdb: cdb.reportTargetPortGroups(1024) })],
]);

function key(opcode: number, serviceAction?: number): string {
  return serviceAction === undefined ? `${opcode}` : `${opcode}/${serviceAction}`;
}

const keyOf = (e: CommandEntry): string => key(e.opcode, e.serviceAction);

/** Everything a command could change that another initiator can observe. */
function observable(b: Bench): unknown {
  const pr = b.lu.reservations;
  return {
    data: createHash('sha256').update(b.backend.bytes).digest('hex'),
    modes: { ...b.lu.modes },
    prGeneration: pr.generation,
    registrants: pr.registrants.map((r) => `${r.initiator}=${r.key}`).sort(),
    reservation: pr.reservation ? { ...pr.reservation } : null,
    legacyHolder: pr.legacyHolder ?? null,
    mediumCalls: b.backend.calls.filter((c) => c.op === 'write' || c.op === 'discard' || c.op === 'writeZeroes').length,
  };
}

/** The gateway's target port groups: active/optimized, so every sample runs as without ALUA (port-groups.ts). */
const portGroups = (state: AluaState = 'active-optimized'): PortGroupsConfig => ({ local: { group: 1, state, relativePort: 1 }, peers: [] });

async function bench(t: ExecutionContext, readOnlyLu: boolean, groups = new TargetPortGroups(portGroups())): Promise<Bench> {
  const { lu, backend } = makeLu({ readOnly: readOnlyLu, portGroups: groups });
  const n = await ready(t, lu, 'host-under-test');
  const other = await ready(t, lu, 'host-other');
  return { lu, backend, n, other };
}

test('every command in the table declares its access, has a sample here, and only those', (t) => {
  const seen = new Set<string>();
  for (const e of COMMANDS) {
    t.true(REQUIRED_ACCESS.includes(e.access), `${e.name}: declared access ${String(e.access)}`);
    t.true(SAMPLES.has(keyOf(e)), `${e.name}: no sample in test/scsi/access.test.ts; add one`);
    seen.add(keyOf(e));
  }
  t.deepEqual([...SAMPLES.keys()].filter((k) => !seen.has(k)), [], 'samples for commands no longer in the table');
});

test('a read-write initiator runs every sample; only write and shared-state commands change what others see', async (t) => {
  for (const e of COMMANDS) {
    const build = SAMPLES.get(keyOf(e));
    if (!build) continue;
    const b = await bench(t, false);
    const s = await build(b);
    const before = observable(b);
    assertGood(t, await run(b.lu, b.n, s.cdb, { access: 'rw', ...(s.out ? { out: s.out } : {}) }), `${e.name} from rw`);
    if (e.access === 'read') t.deepEqual(observable(b), before, `${e.name} (read) changed shared state`);
    else t.notDeepEqual(observable(b), before, `${e.name} (${e.access}): the sample must change something, or the refusal test proves nothing`);
  }
});

for (const [what, readOnlyLu, access] of [
  ['a read-only initiator', false, 'ro'],
  ['any initiator of a read-only LU', true, 'rw'],
] as const satisfies readonly (readonly [string, boolean, Access])[]) {
  test(`${what}: read commands run; write and shared-state commands are 07 27/00 and change nothing`, async (t) => {
    for (const e of COMMANDS) {
      const build = SAMPLES.get(keyOf(e));
      if (!build) continue;
      const b = await bench(t, readOnlyLu);
      const s = await build(b);
      const before = observable(b);
      const r = await run(b.lu, b.n, s.cdb, { access, ...(s.out ? { out: s.out } : {}) });
      if (e.access === 'read') {
        assertGood(t, r, e.name);
      } else {
        assertSense(t, r, WRITE_PROTECTED, `${e.name} (${e.access})`);
        t.is(r.transferLength, 0, `${e.name}: refused without fetching any data-out`);
      }
      t.deepEqual(observable(b), before, `${e.name}: nothing another initiator sees changed`);
      // GOOD, or RESERVATION CONFLICT where the sample's setup reserved the LU: never a unit attention.
      t.not((await run(b.lu, b.other, cdb.testUnitReady())).status, ScsiStatus.CHECK_CONDITION, `${e.name}: no unit attention for the others`);
    }
  });
}

// ALUA (SPC-4 5.15.2.4.4, 5.15.2.4.5): each entry declares down to which state
// it is answered (command-spec.ts `alua`); everything else is media access.
for (const [state, refusal, served] of [
  ['standby', ALUA_STANDBY, ['standby', 'unavailable']],
  ['unavailable', ALUA_UNAVAILABLE, ['unavailable']],
] as const) {
  test(`in ${state}, a command is answered when it declares so, and is otherwise NOT READY ${refusal.asc.toString(16)}/${refusal.ascq.toString(16).padStart(2, '0')} and changes nothing`, async (t) => {
    for (const e of COMMANDS) {
      const build = SAMPLES.get(keyOf(e));
      if (!build) continue;
      const groups = new TargetPortGroups(portGroups());
      const b = await bench(t, false, groups);
      // The sample's setup runs while active; then the port goes to the state under test.
      const s = await build(b);
      groups.update(portGroups(state));
      const before = observable(b);
      const r = await run(b.lu, b.n, s.cdb, { access: 'rw', ...(s.out ? { out: s.out } : {}) });
      if ((served as readonly string[]).includes(e.alua ?? 'active')) {
        assertGood(t, r, `${e.name} (alua ${e.alua ?? 'active'})`);
      } else {
        assertSense(t, r, refusal, `${e.name} (media access)`);
        t.deepEqual(observable(b), before, `${e.name}: refused, and nothing another initiator sees changed`);
      }
    }
  });
}

test('MODE SELECT from a read-only initiator leaves WCE and D_SENSE as every other initiator sees them (issue 9, defect 4)', async (t) => {
  const b = await bench(t, false);
  const control = await currentPage(b, ModePage.CONTROL);
  control[2] |= 0x04;
  const list = modeSelectList10([await flippedCaching(b), control]);
  assertSense(t, await run(b.lu, b.n, cdb.modeSelect10(list.length), { out: list, access: 'ro' }), WRITE_PROTECTED);
  const seen = await run(b.lu, b.other, cdb.modeSense10({ page: ModePage.ALL, allocationLength: 255, dbd: true }));
  assertGood(t, seen, 'the other initiator: no MODE PARAMETERS CHANGED');
  const pages = parseModeSense10(seen.data);
  t.true(parseCachingPage(findModePage(pages, ModePage.CACHING) ?? Buffer.alloc(0)).writeCacheEnabled, 'WCE unchanged');
  t.false(parseControlPage(findModePage(pages, ModePage.CONTROL) ?? Buffer.alloc(0)).descriptorSense, 'D_SENSE unchanged');
  const err = await run(b.lu, b.other, cdb.read16(2n ** 40n, 1));
  t.is(err.sense?.format, 'fixed', 'sense is still fixed format for everyone');
});

test('docs/target.md lists every command of the table with its declared access', (t) => {
  const doc = readFileSync(new URL('../../docs/target.md', import.meta.url), 'utf8');
  const rows = new Map<string, string>();
  for (const m of doc.matchAll(/^\| `([^`]+)` \| (read|write|shared-state) \|/gm)) rows.set(m[1], m[2]);
  for (const e of COMMANDS) t.is(rows.get(e.name), e.access, `${e.name}: docs/target.md row`);
  t.is(rows.size, COMMANDS.length, 'no rows for commands that are not in the table');
  const alua = new Map<string, string>();
  for (const m of doc.matchAll(/^\| `([^`]+)` \| (?:read|write|shared-state) \|.*\| (active|standby|unavailable) \|$/gm)) alua.set(m[1], m[2]);
  for (const e of COMMANDS) t.is(alua.get(e.name), e.alua ?? 'active', `${e.name}: docs/target.md "Served down to" column`);
});
