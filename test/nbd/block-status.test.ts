// base:allocation over the NBD export of a thin, sparse-file-backed volume,
// seen by real clients: `nbdinfo --map` and `qemu-img map` show the hole and
// the data where rblk wrote them, from GET LBA STATUS at the target; a
// discard (qemu-io) makes a hole again. The export runs as `rblk attach`.
import test from 'ava';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pattern, rblk, startRblk, tempDir } from '../cli/helpers/cli.js';
import { startTargetProcess, stopAllTargets } from '../cli/helpers/target-process.js';

const exec = promisify(execFile);
const MiB = 1 << 20;
const SIZE = 8 * MiB;
test.after.always(stopAllTargets);

const have = (tool: string): boolean => ['/usr/bin', '/usr/local/bin', '/bin'].some((d) => existsSync(join(d, tool)));

interface MapEntry {
  offset: number;
  length: number;
  type?: number;
  description?: string;
  zero?: boolean;
  data?: boolean;
}

/** Adjacent entries of the same kind merged, so the assertion does not depend on how the server split its runs. */
function merged<T extends MapEntry>(entries: T[], same: (a: T, b: T) => boolean): T[] {
  const out: T[] = [];
  for (const e of entries) {
    const last = out[out.length - 1];
    if (last !== undefined && same(last, e) && last.offset + last.length === e.offset) last.length += e.length;
    else out.push({ ...e });
  }
  return out;
}

// Without nbdinfo and qemu-img (libnbd-bin, qemu-utils) this is a skip, never a pass.
(have('nbdinfo') && have('qemu-img') ? test : test.skip)('nbdinfo --map and qemu-img map see the holes and the data of a thin volume', async (t) => {
  const dir = await tempDir(t, 'map');
  const backing = join(dir, 'thin.img');
  const tp = await startTargetProcess(t, { provider: 'tcp', volumes: [{ name: 'thin', lun: 0, size: SIZE, file: backing }] });
  // Data at [1 MiB, 2 MiB) and [5 MiB, 5 MiB + 64 KiB); holes elsewhere.
  t.is((await rblk(['write', tp.url('thin'), '--offset', '1m'], { input: pattern(MiB, 3) })).code, 0);
  t.is((await rblk(['write', tp.url('thin'), '--offset', '5m'], { input: pattern(64 * 1024, 4) })).code, 0);
  t.true((await stat(backing)).blocks * 512 < SIZE, 'the backing file is sparse');

  const socket = join(dir, 'nbd.sock');
  const att = await startRblk(t, ['attach', tp.url('thin'), '--nbd-socket', socket], /serving .*\n/);
  const uri = `nbd+unix:///thin?socket=${socket}`;

  const contexts = await exec('nbdinfo', ['--list', '--json', uri]);
  const listed = JSON.parse(contexts.stdout) as { exports: Array<{ contexts?: string[] }> };
  t.deepEqual(listed.exports[0].contexts, ['base:allocation'], 'LIST_META_CONTEXT offers base:allocation');

  const expected = [
    { offset: 0, length: MiB, hole: true },
    { offset: MiB, length: MiB, hole: false },
    { offset: 2 * MiB, length: 3 * MiB, hole: true },
    { offset: 5 * MiB, length: 64 * 1024, hole: false },
    { offset: 5 * MiB + 64 * 1024, length: 3 * MiB - 64 * 1024, hole: true },
  ];
  const map = JSON.parse((await exec('nbdinfo', ['--map', '--json', uri])).stdout) as MapEntry[];
  t.deepEqual(
    merged(map, (a, b) => a.type === b.type).map((e) => ({ offset: e.offset, length: e.length, hole: e.type === 3 })),
    expected,
    'nbdinfo --map: hole,zero (3) and data (0)',
  );
  t.true(map.filter((e) => e.type === 3).every((e) => e.description === 'hole,zero'));

  const qmap = JSON.parse((await exec('qemu-img', ['map', '--output=json', '-f', 'raw', uri])).stdout) as MapEntry[];
  t.deepEqual(
    merged(qmap, (a, b) => a.data === b.data && a.zero === b.zero).map((e) => ({ offset: e.offset, length: e.length, hole: e.data === false && e.zero === true })),
    expected,
    'qemu-img map: data false, zero true over the holes',
  );

  // A discard through the export (NBD_CMD_TRIM → UNMAP) makes the first data run a hole again.
  await exec('qemu-io', ['-f', 'raw', '-c', `discard ${MiB} ${MiB}`, uri]);
  const again = merged(JSON.parse((await exec('nbdinfo', ['--map', '--json', uri])).stdout) as MapEntry[], (a, b) => a.type === b.type);
  t.deepEqual(again.slice(0, 2).map((e) => [e.offset, e.length, e.type]), [[0, 5 * MiB, 3], [5 * MiB, 64 * 1024, 0]]);

  const exited = once(att.child, 'exit');
  att.child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  t.is(code, 0, att.output().err);
});
