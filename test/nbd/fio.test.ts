// fio's nbd engine (fio, built with libnbd) drives queued random I/O and
// verifies every block it wrote with crc32c.
import test, { type ExecutionContext } from 'ava';
import { requireTool, runOk, serve } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';

const MiB = 1024 * 1024;

interface FioSide {
  io_bytes: number;
  total_ios: number;
}

interface FioJob {
  jobname: string;
  error: number;
  read: FioSide;
  write: FioSide;
}

async function fio(t: ExecutionContext, uri: string, rw: string): Promise<FioJob> {
  requireTool('fio', 'fio');
  const { stdout } = await runOk(t, 'fio', [
    `--name=${rw}`,
    '--ioengine=nbd',
    `--uri=${uri}`,
    `--rw=${rw}`,
    '--bs=4k',
    '--iodepth=16',
    '--size=32m',
    '--verify=crc32c',
    '--do_verify=1',
    // Otherwise fio leaves local-*-verify.state files in the working directory.
    '--verify_state_save=0',
    '--output-format=json',
  ]);
  // fio may print notes before the JSON document.
  const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as { jobs: FioJob[] };
  t.is(report.jobs.length, 1);
  const job = report.jobs[0];
  if (job === undefined) throw new Error('fio reported no job');
  return job;
}

test('fio randwrite 4k at depth 16 over 32 MiB, verified with crc32c', async (t) => {
  const device = new MemoryDevice({ size: 32 * MiB });
  const { uri } = await serve(t, new Map([['disk', device]]));
  const job = await fio(t, uri('disk'), 'randwrite');
  t.is(job.error, 0);
  t.is(job.write.io_bytes, 32 * MiB);
  t.is(job.read.io_bytes, 32 * MiB, 'the verify pass read every block back');
  t.true(device.maxActive > 1, 'requests overlapped on the device');
});

test('fio randrw 4k at depth 16 over 32 MiB, verified with crc32c', async (t) => {
  const device = new MemoryDevice({ size: 32 * MiB, blockSize: 4096 });
  const { uri } = await serve(t, new Map([['disk', device]]), { unix: true });
  const job = await fio(t, uri('disk'), 'randrw');
  t.is(job.error, 0);
  t.true(job.write.io_bytes > 0);
  t.true(job.read.io_bytes > job.write.io_bytes, 'reads include the verify pass');
  t.is(device.calls.filter((c) => c.op === 'write').length * 4096, job.write.io_bytes);
});
