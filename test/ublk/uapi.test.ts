// The ublk ABI of initiator/ublk/uapi.ts against something we did not write:
// the system's own <linux/ublk_cmd.h> (Debian's linux-libc-dev), compiled by
// the C compiler into a program that prints every offset, size and constant
// we use. A test that cannot compile that (no header, no compiler) is skipped.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  decodeDevInfo,
  decodeIoCmd,
  decodeIoDesc,
  descArrayBytes,
  descArrayOffset,
  encodeCtrlCmd,
  encodeDevInfo,
  encodeIoCmd,
  encodeIoDesc,
  encodeParams,
  UBLK_LAYOUT,
  UBLK_MAX_QUEUE_DEPTH,
  UBLK_PARAM_TYPE_BASIC,
  UBLK_PARAM_TYPE_DISCARD,
  UblkAttr,
  UblkCtrl,
  UblkFeature,
  UblkIoCmd,
  UblkIoFlag,
  UblkOp,
  UblkState,
} from '../../initiator/ublk/uapi.js';

const HEADER = '/usr/include/linux/ublk_cmd.h';

function hasCompiler(): boolean {
  try {
    execFileSync('cc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const STRUCTS: Record<keyof typeof UBLK_LAYOUT, string> = {
  ctrlCmd: 'ublksrv_ctrl_cmd',
  devInfo: 'ublksrv_ctrl_dev_info',
  ioDesc: 'ublksrv_io_desc',
  ioCmd: 'ublksrv_io_cmd',
  params: 'ublk_params',
  paramBasic: 'ublk_param_basic',
  paramDiscard: 'ublk_param_discard',
};

/** Every name the C program prints, with the value we hold for it. */
function expected(): Map<string, number | bigint> {
  const m = new Map<string, number | bigint>();
  for (const [key, struct] of Object.entries(STRUCTS) as [keyof typeof UBLK_LAYOUT, string][]) {
    for (const [field, value] of Object.entries(UBLK_LAYOUT[key])) m.set(field === 'size' ? `sizeof(struct ${struct})` : `offsetof(struct ${struct}, ${field})`, value);
  }
  const constants: [string, Record<string, number | bigint>][] = [
    ['UBLK_CMD_', UblkCtrl],
    ['UBLK_IO_', UblkIoCmd],
    ['UBLK_IO_OP_', UblkOp],
    ['UBLK_IO_F_', UblkIoFlag],
    ['UBLK_F_', UblkFeature],
    ['UBLK_ATTR_', UblkAttr],
    ['UBLK_S_DEV_', UblkState],
  ];
  for (const [prefix, table] of constants) for (const [name, value] of Object.entries(table)) m.set(`${prefix}${name}`, value);
  m.set('UBLK_PARAM_TYPE_BASIC', UBLK_PARAM_TYPE_BASIC);
  m.set('UBLK_PARAM_TYPE_DISCARD', UBLK_PARAM_TYPE_DISCARD);
  m.set('UBLK_MAX_QUEUE_DEPTH', UBLK_MAX_QUEUE_DEPTH);
  return m;
}

(existsSync(HEADER) && hasCompiler() ? test : test.skip)(`every offset, size and constant matches ${HEADER}`, (t) => {
  const want = expected();
  const dir = mkdtempSync(join(tmpdir(), 'rblk-ublk-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const lines = [...want.keys()].map((name) => `  printf("%s=%llu\\n", ${JSON.stringify(name)}, (unsigned long long)(${name}));`);
  const src = ['#include <stddef.h>', '#include <stdio.h>', '#include <linux/ublk_cmd.h>', 'int main(void) {', ...lines, '  return 0;', '}', ''].join('\n');
  writeFileSync(join(dir, 'layout.c'), src);
  execFileSync('cc', ['-o', join(dir, 'layout'), join(dir, 'layout.c')], { stdio: 'pipe' });
  const got = new Map(
    execFileSync(join(dir, 'layout'), { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.lastIndexOf('=')), BigInt(l.slice(l.lastIndexOf('=') + 1))] as const),
  );
  t.is(got.size, want.size);
  const differ = [...want].filter(([name, value]) => got.get(name) !== BigInt(value)).map(([name, value]) => `${name}: ours ${value}, the header's ${got.get(name)}`);
  t.deepEqual(differ, []);
});

test('the control command, device info and I/O command encode their fields in place and decode back', (t) => {
  const c = encodeCtrlCmd({ devId: 7, queueId: -1, len: 64, addr: 0x7f00_1234_5000n, data: [1n, 2n] });
  t.is(c.length, 32);
  t.is(c.readUInt32LE(0), 7);
  t.is(c.readUInt16LE(4), 0xffff, 'queue -1: not for a queue');
  t.is(c.readUInt16LE(6), 64);
  t.is(c.readBigUInt64LE(8), 0x7f00_1234_5000n);
  t.is(c.readBigUInt64LE(24), 2n);

  const info = { nrHwQueues: 2, queueDepth: 128, state: UblkState.LIVE, maxIoBufBytes: 512 * 1024, devId: 0xffffffff, ublksrvPid: 4242, flags: UblkFeature.URING_CMD_COMP_IN_TASK, ublksrvFlags: 9n };
  t.deepEqual(decodeDevInfo(encodeDevInfo(info)), info);
  t.throws(() => decodeDevInfo(Buffer.alloc(63)), { instanceOf: RangeError });

  const io = { qId: 1, tag: 4095, result: -5, addr: 0x1000n };
  t.deepEqual(decodeIoCmd(encodeIoCmd(io)), io);
});

test('I/O descriptors: op in bits 0-7, flags above, each tag at 24 bytes', (t) => {
  const array = Buffer.concat([
    encodeIoDesc({ op: UblkOp.READ, flags: 0, nrSectors: 8, startSector: 16n, addr: 0n }),
    encodeIoDesc({ op: UblkOp.WRITE, flags: UblkIoFlag.FUA, nrSectors: 256, startSector: 2n ** 33n, addr: 0xdead_0000n }),
  ]);
  t.deepEqual(decodeIoDesc(array, 1), { op: UblkOp.WRITE, flags: UblkIoFlag.FUA, nrSectors: 256, startSector: 2n ** 33n, addr: 0xdead_0000n });
  t.is(array.readUInt32LE(24), UblkOp.WRITE | UblkIoFlag.FUA);
  t.is(decodeIoDesc(array, 0).nrSectors, 8);
  t.throws(() => decodeIoDesc(array, 2), { instanceOf: RangeError });
  t.throws(() => decodeIoDesc(array, -1), { instanceOf: RangeError });
});

test('parameters: len is the whole struct, types names the parts present', (t) => {
  const basic = { attrs: UblkAttr.VOLATILE_CACHE | UblkAttr.FUA, logicalBsShift: 12, physicalBsShift: 12, ioOptShift: 17, ioMinShift: 12, maxSectors: 256, chunkSectors: 0, devSectors: 2n ** 31n, virtBoundaryMask: 0n };
  const p = encodeParams({ basic });
  t.is(p.readUInt32LE(0), 64);
  t.is(p.readUInt32LE(4), UBLK_PARAM_TYPE_BASIC);
  t.is(p.readUInt8(8 + 4), 12);
  t.is(p.readUInt32LE(8 + 8), 256);
  t.is(p.readBigUInt64LE(8 + 16), 2n ** 31n);
  t.true(p.subarray(40).equals(Buffer.alloc(24)), 'no discard part');
  const d = encodeParams({ basic, discard: { discardAlignment: 0, discardGranularity: 4096, maxDiscardSectors: 1 << 16, maxWriteZeroesSectors: 1 << 16, maxDiscardSegments: 1 } });
  t.is(d.readUInt32LE(4), UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD);
  t.is(d.readUInt32LE(40 + 4), 4096);
  t.is(d.readUInt16LE(40 + 16), 1);
});

test('each queue maps its descriptors at a page-rounded stride for the deepest queue', (t) => {
  t.is(descArrayBytes(128), 4096);
  t.is(descArrayBytes(171), 8192, '171 × 24 bytes is 4104: two pages');
  t.is(descArrayOffset(0), 0);
  t.is(descArrayOffset(3), 3 * 24 * 4096, '4096 descriptors of 24 bytes is 24 pages per queue');
});
