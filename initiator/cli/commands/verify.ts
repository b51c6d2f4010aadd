// `rblk verify URL`: write a self-describing pattern (verify-pattern.ts) over
// a range, flush, read it back and check every block; or, with --read-only,
// check a pattern an earlier run wrote. The first --max-mismatches bad blocks
// are listed on stdout, then their count; any bad block makes the exit status 1.
import type { Argv } from 'yargs';
import type { Volume } from '../../volume.js';
import { chunks, parseRangeArgs, resolveRange, type ByteRange } from '../byte-range.js';
import { QuietExit, UsageError } from '../cli-error.js';
import { json } from '../output.js';
import { formatBytes } from '../size.js';
import { connectionOptions, withVolume } from '../target-args.js';
import { TransferProgress } from '../transfer-progress.js';
import { checkBlock, fillBlocks, MIN_VERIFY_BLOCK, type BlockMismatch } from '../verify-pattern.js';
import { VERBS } from '../verbs.js';

const CHUNK = 1 << 20;
/** Chunks in flight: enough to keep the fabric busy, little enough for any volume's pool. */
const WINDOW = 4;
export const DEFAULT_SEED = 1;
/** Bad blocks listed before only their count is kept: a wiped volume must not print a line per block. */
export const DEFAULT_MAX_MISMATCHES = 10;

/** Runs fn over the chunks with up to WINDOW at once, in order of start; rejects with the first failure. */
async function eachChunk(parts: ByteRange[], fn: (p: ByteRange) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < parts.length) await fn(parts[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(WINDOW, parts.length) }, lane));
}

async function writePattern(vol: Volume, range: ByteRange, seed: number, progress: TransferProgress): Promise<void> {
  const bs = vol.blockSize;
  await eachChunk(chunks(range, CHUNK), async (p) => {
    const data = Buffer.alloc(p.length);
    fillBlocks(data, bs, p.offset / bs, seed);
    await vol.write(p.offset, data);
    progress.add(p.length);
  });
  await vol.flush();
}

/** Reads the range WINDOW chunks ahead and reports bad blocks as found, in LBA order; resolves their number. */
async function checkPattern(vol: Volume, range: ByteRange, seed: number, progress: TransferProgress, report: (m: BlockMismatch) => void): Promise<number> {
  const bs = vol.blockSize;
  const parts = chunks(range, CHUNK);
  const ahead: Array<Promise<Buffer>> = [];
  let issued = 0;
  const issue = (): void => {
    const p = parts[issued++];
    const read = vol.read(p.offset, p.length);
    // Awaited in turn below; until then a failure must not count as unhandled.
    read.catch(() => undefined);
    ahead.push(read);
  };
  while (issued < parts.length && ahead.length < WINDOW) issue();
  const scratch = Buffer.alloc(bs);
  let bad = 0;
  for (const p of parts) {
    const data = await (ahead.shift() as Promise<Buffer>);
    if (issued < parts.length) issue();
    for (let i = 0; i < p.length / bs; i++) {
      const m = checkBlock(data.subarray(i * bs, (i + 1) * bs), p.offset / bs + i, seed, scratch);
      if (m !== undefined) {
        bad++;
        report(m);
      }
    }
    progress.add(p.length);
  }
  return bad;
}

export function verifyCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.verify.command,
    VERBS.verify.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P]' })
        .options(connectionOptions)
        .option('offset', { type: 'string', requiresArg: true, describe: 'start of the range, block-aligned (default 0)' })
        .option('length', { type: 'string', requiresArg: true, describe: 'length of the range (default to the end)' })
        .option('seed', { type: 'number', default: DEFAULT_SEED, requiresArg: true, describe: 'tells this pattern from another run\'s' })
        .option('read-only', { type: 'boolean', default: false, describe: 'only check a pattern written earlier with the same seed' })
        .option('yes', { alias: 'y', type: 'boolean', default: false, describe: 'confirm that writing the pattern destroys the range\'s data' })
        .option('max-mismatches', { type: 'number', default: DEFAULT_MAX_MISMATCHES, requiresArg: true, describe: 'list at most this many bad blocks (all are counted)' })
        .option('progress', { type: 'boolean', describe: 'progress on stderr (default: when stderr is a terminal)' })
        .option('json', { type: 'boolean', default: false, describe: 'print the outcome as one JSON object' })
        .example('$0 verify rblk://10.0.0.5/scratch --yes', 'write, read back, compare')
        .example('$0 verify rblk://10.0.0.5/scratch --read-only', 'after a target restart: is the pattern still there?'),
    async (a) => {
      const seed = a.seed;
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new UsageError(`--seed ${seed} is not an integer in 0..4294967295`);
      if (!a['read-only'] && !a.yes) {
        throw new UsageError('verify overwrites the range with its pattern: pass --yes to confirm, or --read-only to check a pattern written earlier');
      }
      const max = a['max-mismatches'];
      if (!Number.isInteger(max) || max < 0) throw new UsageError(`--max-mismatches ${max} is not a non-negative integer`);
      const r = parseRangeArgs(a);
      const outcome = await withVolume(a.url, a, async (vol) => {
        if (vol.blockSize < MIN_VERIFY_BLOCK) throw new UsageError(`volume ${vol.name}'s ${vol.blockSize}-byte blocks are too small for the verify pattern`);
        const range = resolveRange(vol, r);
        const listed: Array<BlockMismatch & { byte: number }> = [];
        const progress = new TransferProgress(a.progress, range.length, a['read-only'] ? 'checked' : 'wrote');
        try {
          if (!a['read-only']) {
            await writePattern(vol, range, seed, progress);
            progress.phase('checked', range.length);
          }
          const bad = await checkPattern(vol, range, seed, progress, (m) => {
            if (listed.length >= max) return;
            listed.push({ ...m, byte: m.lba * vol.blockSize });
            if (!a.json) {
              // Clear the bar first so a mismatch line is not drawn over it.
              progress.clear();
              process.stdout.write(`mismatch at LBA ${m.lba} (byte ${m.lba * vol.blockSize}): expected ${m.expected}; found ${m.found}\n`);
            }
          });
          return { bad, listed, range, blocks: range.length / vol.blockSize, name: vol.name, elapsedMs: progress.elapsedMs };
        } finally {
          progress.stop();
        }
      });
      const { bad, listed } = outcome;
      if (a.json) {
        process.stdout.write(
          json({
            volume: outcome.name,
            offset: outcome.range.offset,
            length: outcome.range.length,
            blocks: outcome.blocks,
            seed,
            readOnly: a['read-only'],
            ok: bad === 0,
            badBlocks: bad,
            mismatches: listed,
            unlisted: bad - listed.length,
            elapsedMs: outcome.elapsedMs,
          }),
        );
      }
      const what = `${outcome.name} [${outcome.range.offset}, +${outcome.range.length}) (${formatBytes(outcome.range.length)}, ${outcome.blocks} blocks), seed ${seed}`;
      if (bad === 0) {
        if (!a.json) process.stdout.write(`verify ${what}: OK\n`);
        return;
      }
      const blocks = (n: number): string => `${n} bad block${n === 1 ? '' : 's'}`;
      if (!a.json) {
        // --max-mismatches 0 asked for the count alone: nothing to point at.
        const more = bad > listed.length && max > 0 ? ` (the first ${listed.length} listed; --max-mismatches N for more)` : '';
        process.stdout.write(`verify ${what}: ${blocks(bad)}${more}\n`);
      }
      process.stderr.write(`rblk: verify found ${blocks(bad)} in volume ${outcome.name}\n`);
      throw new QuietExit(1, 'verify found bad blocks');
    },
  );
}
