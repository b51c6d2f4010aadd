// `rblk write URL`: stdin or a file onto a volume at a block-aligned offset,
// then SYNCHRONIZE CACHE (SBC-4 5.26), or over nvme+tcp:// Flush (NVM 1.0
// §3.2.2), so the data is durable when it exits 0.
// One chunk is written while the next is being read from the input.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Argv } from 'yargs';
import type { NvmeVolume } from '../../nvme/volume.js';
import type { Volume } from '../../volume.js';
import { parseRangeArgs, resolveRange } from '../byte-range.js';
import { UsageError } from '../cli-error.js';
import { json } from '../output.js';
import { connectionOptions, withAnyVolume } from '../target-args.js';
import { TransferProgress } from '../transfer-progress.js';
import { IO_CHUNK } from './read.js';
import { VERBS } from '../verbs.js';

interface WriteOutcome {
  bytes: number;
  padded: number;
}

async function copyIn(vol: Volume | NvmeVolume, offset: number, input: AsyncIterable<Buffer>, pad: boolean, fua: boolean, progress: TransferProgress): Promise<WriteOutcome> {
  const bs = vol.blockSize;
  let staged = Buffer.alloc(IO_CHUNK);
  let fill = 0;
  let at = offset;
  let pending: Promise<void> | null = null;
  const flushStaged = async (length: number): Promise<void> => {
    if (at + length > vol.size) {
      throw new Error(`the input runs past the end of volume ${vol.name} (${vol.size} bytes); ${at - offset} bytes were written from offset ${offset}`);
    }
    const data = staged.subarray(0, length);
    const write = vol.write(at, data, { fua }).then(() => progress.add(length));
    write.catch(() => undefined);
    if (pending !== null) await pending;
    pending = write;
    at += length;
    // The buffer being written stays untouched until its write completes.
    staged = Buffer.alloc(IO_CHUNK);
  };
  for await (const chunk of input) {
    let used = 0;
    while (used < chunk.length) {
      const n = Math.min(chunk.length - used, IO_CHUNK - fill);
      chunk.copy(staged, fill, used, used + n);
      fill += n;
      used += n;
      if (fill === IO_CHUNK) {
        await flushStaged(fill);
        fill = 0;
      }
    }
  }
  let padded = 0;
  if (fill % bs !== 0) {
    if (!pad) {
      if (pending !== null) await pending;
      // Not a usage error: whatever came before the partial block has been written.
      throw new Error(
        `the input ends with a partial block (${fill % bs} bytes past the last whole ${bs}-byte block); that block was not written: pass --pad to zero-fill it`,
      );
    }
    padded = bs - (fill % bs);
    fill += padded;
  }
  if (fill > 0) await flushStaged(fill);
  if (pending !== null) await pending;
  return { bytes: at - offset, padded };
}

export function writeCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.write.command,
    VERBS.write.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P] or nvme+tcp://host[:port]/NQN[?nsid=N]' })
        .options(connectionOptions)
        .option('offset', { type: 'string', requiresArg: true, describe: 'where to write, block-aligned (4k, 1MiB, ...); default 0' })
        .option('input', { alias: 'i', type: 'string', requiresArg: true, describe: 'read FILE instead of stdin' })
        .option('pad', { type: 'boolean', default: false, describe: 'zero-fill a partial last block instead of refusing it' })
        .option('fua', { type: 'boolean', default: false, describe: 'write with Force Unit Access' })
        .option('progress', { type: 'boolean', describe: 'progress on stderr (default: when stderr is a terminal)' })
        .option('json', { type: 'boolean', default: false, describe: 'print what was written as one JSON object' })
        .example('$0 write rblk://10.0.0.5/db --offset 1MiB -i blob.bin', '')
        .example('dd if=/dev/urandom bs=4k count=1 | $0 write rblk://10.0.0.5/db', ''),
    async (a) => {
      const r = parseRangeArgs({ offset: a.offset });
      if (a.input === undefined && process.stdin.isTTY) throw new UsageError('no input: pass --input FILE or pipe the data into stdin');
      const inputSize = a.input === undefined ? undefined : (await stat(a.input)).size;
      const result = await withAnyVolume(a.url, a, async ({ vol }) => {
        const { offset } = resolveRange(vol, { offset: r.offset, length: 0 });
        if (inputSize !== undefined) {
          const bs = vol.blockSize;
          if (inputSize % bs !== 0 && !a.pad) {
            throw new UsageError(`${a.input} is ${inputSize} bytes, not a multiple of volume ${vol.name}'s ${bs}-byte block size (pass --pad to zero-fill the last block)`);
          }
          const length = Math.ceil(inputSize / bs) * bs;
          resolveRange(vol, { offset, length });
        }
        const input: AsyncIterable<Buffer> = a.input === undefined ? process.stdin : createReadStream(a.input, { highWaterMark: 1 << 20 });
        const progress = new TransferProgress(a.progress, inputSize ?? null, 'wrote');
        try {
          const out = await copyIn(vol, offset, input, a.pad, a.fua, progress);
          await vol.flush();
          return { ...out, offset, name: vol.name, blockSize: vol.blockSize, elapsedMs: progress.elapsedMs };
        } finally {
          progress.stop();
        }
      });
      if (a.json) {
        const bw = result.elapsedMs > 0 ? (result.bytes * 1000) / result.elapsedMs : 0;
        process.stdout.write(
          json({ volume: result.name, offset: result.offset, bytes: result.bytes, blocks: result.bytes / result.blockSize, padded: result.padded, fua: a.fua, flushed: true, elapsedMs: result.elapsedMs, bandwidth: bw }),
        );
        return;
      }
      const pad = result.padded > 0 ? ` (${result.padded} bytes of zero padding)` : '';
      process.stdout.write(
        `wrote ${result.bytes} bytes (${result.bytes / result.blockSize} blocks) to ${result.name} at offset ${result.offset}${pad}\n`,
      );
    },
  );
}
