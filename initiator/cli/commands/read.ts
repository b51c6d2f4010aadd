// `rblk read URL`: a byte range of a volume to stdout or a file. Chunks are
// read one ahead of the one being written out, so the fabric and the sink
// both stay busy; each chunk is split by Volume.read at the largest transfer.
// An nvme+tcp:// URL reads a namespace the same way (NvmeVolume.read).
import type { Argv } from 'yargs';
import { chunks, parseRangeArgs, resolveRange } from '../byte-range.js';
import { fileSink, stdoutSink, type ByteSink } from '../byte-sink.js';
import { UsageError } from '../cli-error.js';
import { json } from '../output.js';
import { connectionOptions, withAnyVolume } from '../target-args.js';
import { TransferProgress } from '../transfer-progress.js';
import { VERBS } from '../verbs.js';

export const IO_CHUNK = 4 << 20;

export function readCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.read.command,
    VERBS.read.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P] or nvme+tcp://host[:port]/NQN[?nsid=N]' })
        .options(connectionOptions)
        .option('offset', { type: 'string', requiresArg: true, describe: 'first byte, block-aligned (4k, 1MiB, ...); default 0' })
        .option('length', { type: 'string', requiresArg: true, describe: 'bytes, whole blocks; default to the end of the volume' })
        .option('output', { alias: 'o', type: 'string', requiresArg: true, describe: 'write to FILE instead of stdout' })
        .option('progress', { type: 'boolean', describe: 'progress on stderr (default: when stderr is a terminal)' })
        .option('json', { type: 'boolean', default: false, describe: 'print what was read as one JSON object (needs --output)' })
        .example('$0 read rblk://10.0.0.5/db --offset 1MiB --length 4k | xxd', '')
        .example('$0 read rblk://10.0.0.5/db -o db.img', 'the whole volume into a file'),
    async (a) => {
      const r = parseRangeArgs(a);
      if (a.json && a.output === undefined) throw new UsageError('--json needs --output FILE: without it stdout carries the data');
      if (a.output === undefined && process.stdout.isTTY) {
        throw new UsageError('refusing to write binary data to a terminal: pass --output FILE or redirect stdout');
      }
      const result = await withAnyVolume(a.url, a, async ({ vol }) => {
        const range = resolveRange(vol, r);
        const sink: ByteSink = a.output === undefined ? stdoutSink() : await fileSink(a.output);
        const progress = new TransferProgress(a.progress, range.length, 'read');
        try {
          const parts = chunks(range, IO_CHUNK);
          let next = parts.length > 0 ? vol.read(parts[0].offset, parts[0].length) : null;
          for (let i = 0; i < parts.length; i++) {
            const data = await (next as Promise<Buffer>);
            next = i + 1 < parts.length ? vol.read(parts[i + 1].offset, parts[i + 1].length) : null;
            // A read that fails while the sink is failing must not go unhandled.
            next?.catch(() => undefined);
            await sink.write(data);
            progress.add(data.length);
          }
        } finally {
          progress.stop();
          await sink.close();
        }
        const ms = progress.elapsedMs;
        return { volume: vol.name, offset: range.offset, length: range.length, output: a.output, elapsedMs: ms, bandwidth: ms > 0 ? (range.length * 1000) / ms : 0 };
      });
      if (a.json) process.stdout.write(json(result));
    },
  );
}
