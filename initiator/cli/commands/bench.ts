// `rblk bench URL`: random or sequential reads, writes or a mix at a block
// size and queue depth, for a time or a byte count; IOPS, bandwidth and
// latency percentiles. Writes destroy data, so they need --yes.
import { randomFillSync } from 'node:crypto';
import type { Argv } from 'yargs';
import type { RegisteredBuffer } from '../../registered-buffer.js';
import { runBench, type BenchMode, type BenchPattern, type BenchPlan, type BenchResult, type OpStats } from '../bench-engine.js';
import { parseRangeArgs, resolveRange } from '../byte-range.js';
import { QuietExit, UsageError } from '../cli-error.js';
import { PERCENTILES } from '../latency.js';
import { fields, json } from '../output.js';
import { progressBar, progressInterval } from '../progress-bar.js';
import { formatBytes, formatRate, parseDuration, parseSize } from '../size.js';
import { connectionOptions, withAnyVolume } from '../target-args.js';
import { VERBS } from '../verbs.js';

const DEFAULT_RUNTIME_MS = 10_000;
const MAX_QD = 1024;
/** The conventional exit status after SIGINT: 128 + 2. */
export const EXIT_SIGINT = 130;

function latencyLine(s: OpStats): string {
  const l = s.latencyUs;
  return `min ${l.min}  mean ${l.mean}  stdev ${l.stdev}  max ${l.max}  (µs)`;
}

function percentileLine(s: OpStats): string {
  const l = s.latencyUs;
  return `${PERCENTILES.map(([key]) => `${key.replace('_', '.')} ${l[key]}`).join('  ')}  (µs)`;
}

function opsLine(s: OpStats): string {
  return `${s.ops}  (${Math.round(s.iops)} IOPS, ${formatRate(s.bandwidth)})`;
}

function report(name: string, plan: BenchPlan, r: BenchResult, reconnects: number): string {
  const head = `${name}: ${plan.pattern} ${plan.rw}${plan.rw === 'mixed' ? ` (${plan.readPercent}% reads)` : ''}, bs ${formatBytes(plan.blockSize)}, qd ${plan.queueDepth}, ${(r.elapsedMs / 1000).toFixed(2)} s${r.interrupted ? ' (interrupted)' : ''}\n`;
  const rows: Array<[string, string]> = [
    ['ops', opsLine(r)],
    ['latency', latencyLine(r)],
    ['percentiles', percentileLine(r)],
    ['reconnects', String(reconnects)],
  ];
  if (r.read !== undefined && r.write !== undefined) {
    for (const [name, st] of [['read', r.read], ['write', r.write]] as const) {
      rows.push([`${name} ops`, opsLine(st)], [`${name} lat`, latencyLine(st)], [`${name} pct`, percentileLine(st)]);
    }
  }
  return head + fields(rows).split('\n').map((l) => (l === '' ? l : `  ${l}`)).join('\n');
}

export function benchCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.bench.command,
    VERBS.bench.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P] or nvme+tcp://host[:port]/NQN[?nsid=N]' })
        .options(connectionOptions)
        .option('pattern', { choices: ['rand', 'seq'] as const, default: 'rand' as const, describe: 'random or sequential offsets' })
        .option('rw', { choices: ['read', 'write', 'mixed'] as const, default: 'read' as const, describe: 'operations to issue' })
        .option('mix', { type: 'number', default: 70, requiresArg: true, describe: 'percentage of reads with --rw mixed' })
        .option('bs', { type: 'string', default: '4k', requiresArg: true, describe: 'bytes per operation (whole blocks)' })
        .option('qd', { type: 'number', default: 32, requiresArg: true, describe: 'operations in flight' })
        .option('runtime', { type: 'string', requiresArg: true, describe: 'run this long (default 10s)' })
        .option('size', { type: 'string', requiresArg: true, describe: 'instead of a runtime, stop after this many bytes' })
        .option('offset', { type: 'string', requiresArg: true, describe: 'start of the range operated on (default 0)' })
        .option('length', { type: 'string', requiresArg: true, describe: 'length of that range (default to the end)' })
        .option('seed', { type: 'number', requiresArg: true, describe: 'seed of the random offsets (default: random)' })
        .option('zero-copy', { type: 'boolean', default: true, describe: 'use registered buffers (--no-zero-copy copies through the I/O pool; over nvme+tcp both use the buffers directly)' })
        .option('progress', { type: 'boolean', describe: 'progress on stderr: the rate over the last interval (default: when stderr is a terminal)' })
        .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' })
        .option('yes', { alias: 'y', type: 'boolean', default: false, describe: 'confirm that writes may destroy the volume\'s data' })
        .example('$0 bench rblk://10.0.0.5/db --rw read --bs 4k --qd 32 --runtime 30s', '')
        .example('$0 bench rblk://10.0.0.5/scratch --pattern seq --rw write --bs 1MiB --size 4g --yes', ''),
    async (a) => {
      const rw: BenchMode = a.rw;
      const pattern: BenchPattern = a.pattern;
      if (rw !== 'read' && !a.yes) {
        throw new UsageError(`bench --rw ${rw} overwrites the volume's data: pass --yes to confirm, or use --rw read`);
      }
      if (a.runtime !== undefined && a.size !== undefined) throw new UsageError('give --runtime or --size, not both');
      const bs = parseSize(a.bs, '--bs');
      if (bs <= 0) throw new UsageError('--bs must be at least one block');
      if (!Number.isInteger(a.qd) || a.qd < 1 || a.qd > MAX_QD) throw new UsageError(`--qd ${a.qd} is not an integer in 1..${MAX_QD}`);
      if (!Number.isFinite(a.mix) || a.mix < 0 || a.mix > 100) throw new UsageError(`--mix ${a.mix} is not a percentage (0..100)`);
      if (a.seed !== undefined && !Number.isInteger(a.seed)) throw new UsageError(`--seed ${a.seed} is not an integer`);
      const runtimeMs = a.size !== undefined ? null : a.runtime !== undefined ? parseDuration(a.runtime, '--runtime') : DEFAULT_RUNTIME_MS;
      const totalBytes = a.size !== undefined ? parseSize(a.size, '--size') : null;
      if (runtimeMs !== null && runtimeMs <= 0) throw new UsageError('--runtime must be positive');
      const r = parseRangeArgs(a);
      const connections = a.connections ?? 1;
      const queueDepth = Math.max(2, Math.ceil(a.qd / connections));

      const out = await withAnyVolume(
        a.url,
        a,
        async (at) => {
          const { vol, session } = at;
          if (bs % vol.blockSize !== 0) throw new UsageError(`--bs ${bs} is not a multiple of volume ${vol.name}'s ${vol.blockSize}-byte block size`);
          const range = resolveRange(vol, r);
          if (range.length < bs) throw new UsageError(`the range [${range.offset}, +${range.length}) is smaller than one ${bs}-byte operation`);
          const plan: BenchPlan = {
            pattern,
            rw,
            readPercent: a.mix,
            blockSize: bs,
            queueDepth: a.qd,
            range: { offset: range.offset, length: range.length - (range.length % bs) },
            runtimeMs,
            totalBytes,
            seed: a.seed ?? (Math.random() * 0x1_0000_0000) >>> 0,
          };
          const registered: RegisteredBuffer[] = [];
          let buffers: Buffer[];
          if (a['zero-copy']) {
            // One buffer per connection, as the pooled path has one pool per connection;
            // each is registered on whichever connection carries its commands. An
            // NVMe/TCP session's memory is the session's, one buffer for all its queues.
            const lanes = at.protocol === 'rblk' ? at.session.connections.length : 1;
            const perLane = Math.ceil(a.qd / lanes);
            for (let c = 0; c < lanes; c++) registered.push(session.allocate(perLane * bs));
            buffers = Array.from({ length: a.qd }, (_, i) => {
              const at = Math.floor(i / lanes) * bs;
              return registered[i % lanes].buffer.subarray(at, at + bs);
            });
          } else {
            buffers = Array.from({ length: a.qd }, () => Buffer.alloc(bs));
          }
          // Incompressible data, so a backend or a link that compresses does not flatter the numbers.
          for (const b of buffers) randomFillSync(b);
          const bar = progressBar(a.progress);
          const stop = new AbortController();
          const onSigint = (): void => stop.abort();
          process.once('SIGINT', onSigint);
          // The rate shown is over the last interval, not the average since the start,
          // so a stall or a recovery shows at once (as fio's status line).
          let last = { elapsedMs: 0, ops: 0, bytes: 0 };
          try {
            const result = await runBench(vol, plan, buffers, {
              signal: stop.signal,
              progressMs: progressInterval(),
              ...(bar === null
                ? {}
                : {
                    onProgress: (p) => {
                      const dt = Math.max((p.elapsedMs - last.elapsedMs) / 1000, 0.001);
                      const iops = (p.ops - last.ops) / dt;
                      const rate = (p.bytes - last.bytes) / dt;
                      last = p;
                      bar.update(p.fraction, `${Math.round(iops)} IOPS  ${formatRate(rate)}  ${p.ops} ops  ${(p.elapsedMs / 1000).toFixed(1)} s`);
                    },
                  }),
            });
            return { plan, result, name: vol.name, reconnects: session.reconnects };
          } finally {
            process.off('SIGINT', onSigint);
            bar?.clear();
            for (const r of registered) r.release();
          }
        },
        { queueDepth },
      );
      const { plan, result } = out;
      if (a.json) {
        process.stdout.write(
          json({
            volume: out.name,
            pattern: plan.pattern,
            rw: plan.rw,
            readPercent: plan.rw === 'mixed' ? plan.readPercent : plan.rw === 'read' ? 100 : 0,
            blockSize: plan.blockSize,
            queueDepth: plan.queueDepth,
            offset: plan.range.offset,
            length: plan.range.length,
            seed: plan.seed,
            zeroCopy: a['zero-copy'],
            reconnects: out.reconnects,
            ...result,
          }),
        );
      } else {
        process.stdout.write(report(out.name, plan, result, out.reconnects));
      }
      // The partial result is out; the status says the run was cut short (128 + SIGINT).
      if (result.interrupted) throw new QuietExit(EXIT_SIGINT, 'interrupted by SIGINT');
    },
  );
}
