// Which scenarios a soak runs and at what scale (docs/reliability.md has the command line).
import { fullFilesystem, truncatedFile } from './backing.js';
import { capsuleFuzz } from './capsule-fuzz.js';
import { churn } from './churn.js';
import type { SoakProvider } from './daemon.js';
import { ext4KillRestart } from './ext4.js';
import { killRestart } from './kill-restart.js';
import { nftAvailable } from './nft.js';
import { nvmeFuzz } from './nvme-fuzz.js';
import { partitions } from './partition.js';
import { newRow, type SoakRow } from './report.js';
import { sustained } from './sustained.js';

export const SCENARIOS = ['sustained', 'kill-library', 'kill-nvme', 'kill-nbd', 'kill-ext4', 'fuzz', 'nvme-fuzz', 'partition', 'churn', 'backing'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface SoakArgs {
  /** kill -9 and SIGTERM each, per initiator path. */
  kills: number;
  /** Fuzzed capsules per provider. */
  fuzz: number;
  fuzzBudgetS: number;
  /** Fuzzed NVMe/TCP PDUs (nvme-fuzz.ts). */
  nvmeFuzz: number;
  providers: SoakProvider[];
  churn: number;
  idle: number;
  rawTcp: number;
  partitionMs: number[];
  only: Scenario[];
  /** Seconds of nothing-killed I/O per reactor setting (sustained.ts). */
  sustainS: number;
}

export const FULL: Omit<SoakArgs, 'only'> = { sustainS: 300, kills: 20, fuzz: 1_000_000, fuzzBudgetS: 900, nvmeFuzz: 100_000, providers: ['tcp', 'sockets'], churn: 10_000, idle: 1000, rawTcp: 100, partitionMs: [2000, 15_000] };
export const QUICK: Omit<SoakArgs, 'only'> = { sustainS: 30, kills: 3, fuzz: 20_000, fuzzBudgetS: 120, nvmeFuzz: 10_000, providers: ['tcp', 'sockets'], churn: 500, idle: 50, rawTcp: 10, partitionMs: [2000] };

const USAGE = `usage: soak [--quick] [--sustain SECONDS] [--kills N] [--fuzz N] [--fuzz-budget SECONDS] [--nvme-fuzz N] [--providers tcp,sockets]
            [--churn N] [--idle N] [--raw-tcp N] [--partition-ms MS,MS] [--only ${SCENARIOS.join(',')}]`;

export function parseSoakArgs(argv: string[]): SoakArgs {
  const a: SoakArgs = { ...(argv.includes('--quick') ? QUICK : FULL), only: [...SCENARIOS] };
  const num = (i: number): number => {
    const v = Number(argv[i]);
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`${argv[i - 1]} needs a whole number, not ${JSON.stringify(argv[i])}\n${USAGE}`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--quick') continue;
    else if (k === '--sustain') a.sustainS = num(++i);
    else if (k === '--kills') a.kills = num(++i);
    else if (k === '--fuzz') a.fuzz = num(++i);
    else if (k === '--fuzz-budget') a.fuzzBudgetS = num(++i);
    else if (k === '--nvme-fuzz') a.nvmeFuzz = num(++i);
    else if (k === '--churn') a.churn = num(++i);
    else if (k === '--idle') a.idle = num(++i);
    else if (k === '--raw-tcp') a.rawTcp = num(++i);
    else if (k === '--partition-ms') a.partitionMs = (argv[++i] ?? '').split(',').map(Number);
    else if (k === '--providers') a.providers = (argv[++i] ?? '').split(',') as SoakProvider[];
    else if (k === '--only') a.only = (argv[++i] ?? '').split(',') as Scenario[];
    else throw new RangeError(`unknown argument ${k}\n${USAGE}`);
  }
  for (const s of a.only) if (!SCENARIOS.includes(s)) throw new RangeError(`unknown scenario ${s}\n${USAGE}`);
  for (const p of a.providers) if (p !== 'tcp' && p !== 'sockets') throw new RangeError(`unknown provider ${p}\n${USAGE}`);
  for (const ms of a.partitionMs) if (!Number.isInteger(ms) || ms <= 0) throw new RangeError(`--partition-ms needs positive whole numbers\n${USAGE}`);
  return a;
}

function skipped(scenario: string, why: string): SoakRow {
  return { ...newRow(scenario), skipped: why };
}

export async function runSoak(a: SoakArgs, log: (line: string) => void, onRow: (rows: SoakRow[]) => void = () => undefined): Promise<SoakRow[]> {
  const rows: SoakRow[] = [];
  const add = (r: SoakRow): void => {
    rows.push(r);
    onRow(rows);
    log(`${r.skipped !== undefined ? 'skipped' : r.ok ? 'ok' : 'FAIL'}: ${r.scenario}: ${r.operations} operations, ${r.lost} lost, ${r.daemonExits} daemon exits`);
  };
  const has = (s: Scenario): boolean => a.only.includes(s);
  // First, with nothing killed: every path for sustainS seconds per reactor setting, 0 reconnects.
  if (has('sustained') && a.sustainS > 0) for (const r of await sustained({ seconds: a.sustainS, reactors: [0, 2], log })) add(r);
  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    if (has('kill-library')) add(await killRestart({ path: 'library', signal, kills: a.kills, log }));
    if (has('kill-nvme')) add(await killRestart({ path: 'nvme', signal, kills: a.kills, log }));
    if (has('kill-nbd')) add(await killRestart({ path: 'nbd', signal, kills: a.kills, log }));
    if (has('kill-ext4')) add(await ext4KillRestart({ signal, kills: a.kills, log }));
  }
  // One daemon per provider, so that each row is written as soon as its provider is done.
  if (has('fuzz')) for (const p of a.providers) for (const r of await capsuleFuzz({ providers: [p], capsules: a.fuzz, budgetMs: a.fuzzBudgetS * 1000, log })) add(r);
  if (has('nvme-fuzz') && a.nvmeFuzz > 0) for (const r of await nvmeFuzz({ pdus: a.nvmeFuzz, budgetMs: a.fuzzBudgetS * 1000, log })) add(r);
  if (has('partition')) {
    if (!nftAvailable()) add(skipped('partitions on loopback', 'needs root and nft (apt-get install nftables)'));
    else {
      add(await partitions({ path: 'library', durationsMs: a.partitionMs, duringLogin: true, log }));
      add(await partitions({ path: 'nbd', durationsMs: a.partitionMs, log }));
    }
  }
  if (has('churn')) for (const r of await churn({ cycles: a.churn, idle: a.idle, rawTcp: a.rawTcp, log })) add(r);
  if (has('backing')) {
    add(await fullFilesystem());
    add(await truncatedFile());
  }
  return rows;
}
