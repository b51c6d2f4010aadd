// Network partitions on loopback with nftables: a table of our own (`inet rblk_soak_<pid>_<n>`)
// whose rules match only the soak daemon's port, so nothing else on the machine is touched.
// Every table made is deleted when the partition ends, and, should the process be stopped
// first, by an exit hook (the soak entry turns SIGINT and SIGTERM into an exit).
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { haveTool } from './processes.js';

const run = promisify(execFile);
const live = new Set<string>();
let hooked = false;
let counter = 0;

export type Direction = 'both' | 'to-target' | 'from-target';

/** Deletes every table this process made; synchronous, for exit hooks. */
export function deleteAllTables(): void {
  for (const t of live) {
    try {
      execFileSync('nft', ['delete', 'table', 'inet', t], { stdio: 'ignore' });
    } catch {
      // already gone
    }
    live.delete(t);
  }
}

export function nftAvailable(): boolean {
  return process.getuid?.() === 0 && haveTool('nft');
}

export class Partition {
  readonly table = `rblk_soak_${process.pid}_${counter++}`;

  private constructor(readonly port: number) {}

  static async create(port: number): Promise<Partition> {
    if (!hooked) {
      hooked = true;
      process.on('exit', deleteAllTables);
    }
    const p = new Partition(port);
    live.add(p.table);
    // Loopback traffic passes the input hook once per packet, in each direction.
    await run('nft', ['add', 'table', 'inet', p.table]);
    await run('nft', ['add', 'chain', 'inet', p.table, 'in', '{ type filter hook input priority -10 ; policy accept ; }']);
    return p;
  }

  /** Drops the port's packets in one or both directions (to-target: initiator → rblkd). */
  async cut(direction: Direction): Promise<void> {
    if (direction !== 'from-target') await run('nft', ['add', 'rule', 'inet', this.table, 'in', 'ip', 'daddr', '127.0.0.1', 'tcp', 'dport', String(this.port), 'drop']);
    if (direction !== 'to-target') await run('nft', ['add', 'rule', 'inet', this.table, 'in', 'ip', 'saddr', '127.0.0.1', 'tcp', 'sport', String(this.port), 'drop']);
  }

  async heal(): Promise<void> {
    await run('nft', ['flush', 'chain', 'inet', this.table, 'in']);
  }

  async delete(): Promise<void> {
    if (!live.has(this.table)) return;
    await run('nft', ['delete', 'table', 'inet', this.table]).catch(() => undefined);
    live.delete(this.table);
  }
}
