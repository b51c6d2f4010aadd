// nbdinfo (libnbd-bin) sees the size, flags and block sizes the server offers.
import test, { type ExecutionContext } from 'ava';
import { requireTool, run, runOk, serve } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';

const MiB = 1024 * 1024;

interface ExportJson {
  'export-name': string;
  'export-size': number;
  is_read_only: boolean;
  can_trim: boolean;
  can_fua: boolean;
  can_flush: boolean;
  can_zero: boolean;
  can_multi_conn: boolean;
  can_df: boolean;
  block_size_minimum: number;
  block_size_preferred: number;
  block_size_maximum: number;
}

interface InfoJson {
  protocol: string;
  structured: boolean;
  exports: ExportJson[];
}

function exports(): Map<string, MemoryDevice> {
  return new Map([
    ['disk', new MemoryDevice({ size: 48 * MiB, blockSize: 4096, maxTransfer: 4 * MiB })],
    ['ro', new MemoryDevice({ size: 8 * MiB, readOnly: true, canDiscard: false, maxTransfer: 64 * MiB })],
  ]);
}

async function nbdinfo(t: ExecutionContext, args: string[]): Promise<InfoJson> {
  requireTool('nbdinfo', 'libnbd-bin');
  const { stdout } = await runOk(t, 'nbdinfo', ['--json', ...args]);
  return JSON.parse(stdout) as InfoJson;
}

for (const unix of [false, true]) {
  test(`nbdinfo --json over ${unix ? 'a unix socket' : 'TCP'}: read-write export`, async (t) => {
    const served = await serve(t, exports(), { unix });
    const info = await nbdinfo(t, [served.uri('disk')]);
    t.is(info.protocol, 'newstyle-fixed');
    t.true(info.structured);
    const disk = info.exports[0];
    t.like(disk, {
      'export-name': 'disk',
      'export-size': 48 * MiB,
      is_read_only: false,
      can_trim: true,
      can_fua: true,
      can_flush: true,
      can_zero: true,
      can_multi_conn: true,
      can_df: true,
      block_size_minimum: 4096,
      block_size_preferred: 4096,
      block_size_maximum: 4 * MiB,
    });
  });
}

test('nbdinfo --json: read-only export without discard', async (t) => {
  const served = await serve(t, exports());
  const info = await nbdinfo(t, [served.uri('ro')]);
  t.like(info.exports[0], {
    'export-name': 'ro',
    'export-size': 8 * MiB,
    is_read_only: true,
    can_trim: false,
    can_fua: false,
    can_zero: false,
    can_multi_conn: true,
    block_size_minimum: 512,
    block_size_preferred: 4096,
    block_size_maximum: 32 * MiB,
  });
});

test('nbdinfo --list shows every export', async (t) => {
  const served = await serve(t, exports());
  const info = await nbdinfo(t, ['--list', served.uri('')]);
  t.deepEqual(
    info.exports.map((e) => [e['export-name'], e['export-size']]),
    [
      ['disk', 48 * MiB],
      ['ro', 8 * MiB],
    ],
  );
});

test('nbdinfo fails for an unknown export', async (t) => {
  requireTool('nbdinfo', 'libnbd-bin');
  const served = await serve(t, exports());
  const result = await run(t, 'nbdinfo', ['--json', served.uri('nope')]);
  t.not(result.code, 0);
  // libnbd turns NBD_REP_ERR_UNKNOWN into ENOENT.
  t.regex(result.stderr, /opt_go.*No such file or directory for export: nope/);
});
