// `rblk verify URL`: write a self-describing pattern (verify-pattern.ts) over
// a range, flush, read it back and check every block; or, with --read-only,
// check a pattern an earlier run wrote. Every bad block is listed on stdout;
// any bad block makes the exit status 1.
import type { Argv } from 'yargs';
import type { Volume } from '../../volume.js';
import { chunks, parseRangeArgs, resolveRange, type ByteRange } from '../byte-range.js';
import { QuietExit, UsageError } from '../cli-error.js';
import { formatBytes } from '../size.js';
import { connectionOptions, withVolume } from '../target-args.js';
import { checkBlock, fillBlocks, MIN_VERIFY_BLOCK, type BlockMismatch } from '../verify-pattern.js';

const CHUNK = 1 << 20;
/** Chunks in flight: enough to keep the fabric busy, little enough for any volume's pool. */
const WINDOW = 4;
export const DEFAULT_SEED = 1;

/** Runs fn over the chunks with up to WINDOW at once, in order of start; rejects with the first failure. */
async function eachChunk(parts: ByteRange[], fn: (p: ByteRange) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < parts.length) await fn(parts[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(WINDOW, parts.length) }, lane));
}

async function writePattern(vol: Volume, range: ByteRange, seed: number): Promise<void> {
  const bs = vol.blockSize;
  await eachChunk(chunks(range, CHUNK), async (p) => {
    const data = Buffer.alloc(p.length);
    fillBlocks(data, bs, p.offset / bs, seed);
    await vol.write(p.offset, data);
  });
  await vol.flush();
}

/** Reads the range WINDOW chunks ahead and reports bad blocks as found, in LBA order; resolves their number. */
async function checkPattern(vol: Volume, range: ByteRange, seed: number, report: (m: BlockMismatch) => void): Promise<number> {
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
  }
  return bad;
}

export function verifyCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    'verify <url>',
    'Write a checksummed pattern and read it back (destroys data: needs --yes), or check one with --read-only',
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P]' })
        .options(connectionOptions)
        .option('offset', { type: 'string', requiresArg: true, describe: 'start of the range, block-aligned (default 0)' })
        .option('length', { type: 'string', requiresArg: true, describe: 'length of the range (default to the end)' })
        .option('seed', { type: 'number', default: DEFAULT_SEED, requiresArg: true, describe: 'tells this pattern from another run\'s' })
        .option('read-only', { type: 'boolean', default: false, describe: 'only check a pattern written earlier with the same seed' })
        .option('yes', { alias: 'y', type: 'boolean', default: false, describe: 'confirm that writing the pattern destroys the range\'s data' })
        .example('$0 verify rblk://10.0.0.5/scratch --yes', 'write, read back, compare')
        .example('$0 verify rblk://10.0.0.5/scratch --read-only', 'after a target restart: is the pattern still there?'),
    async (a) => {
      const seed = a.seed;
      if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new UsageError(`--seed ${seed} is not an integer in 0..4294967295`);
      if (!a['read-only'] && !a.yes) {
        throw new UsageError('verify overwrites the range with its pattern: pass --yes to confirm, or --read-only to check a pattern written earlier');
      }
      const r = parseRangeArgs(a);
      const outcome = await withVolume(a.url, a, async (vol) => {
        if (vol.blockSize < MIN_VERIFY_BLOCK) throw new UsageError(`volume ${vol.name}'s ${vol.blockSize}-byte blocks are too small for the verify pattern`);
        const range = resolveRange(vol, r);
        if (!a['read-only']) await writePattern(vol, range, seed);
        const bad = await checkPattern(vol, range, seed, (m) =>
          process.stdout.write(`mismatch at LBA ${m.lba} (byte ${m.lba * vol.blockSize}): expected ${m.expected}; found ${m.found}\n`),
        );
        return { bad, range, blocks: range.length / vol.blockSize, name: vol.name };
      });
      const what = `${outcome.name} [${outcome.range.offset}, +${outcome.range.length}) (${formatBytes(outcome.range.length)}, ${outcome.blocks} blocks), seed ${seed}`;
      if (outcome.bad === 0) {
        process.stdout.write(`verify ${what}: OK\n`);
        return;
      }
      process.stdout.write(`verify ${what}: ${outcome.bad} bad block${outcome.bad === 1 ? '' : 's'}\n`);
      process.stderr.write(`rblk: verify found ${outcome.bad} bad block${outcome.bad === 1 ? '' : 's'} in volume ${outcome.name}\n`);
      throw new QuietExit(1, 'verify found bad blocks');
    },
  );
}
