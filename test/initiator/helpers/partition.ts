// A network partition of one loopback port with nftables: a table of the
// test's own whose output chain drops new connections (SYN) to the port, so a
// connect attempt hangs as it does behind a dead link, while connections
// already established keep working. Root and the nft tool are needed; the
// table is deleted in teardown.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import type { ExecutionContext } from 'ava';

const exec = promisify(execFile);
/**
 * The nftables tool by its absolute path: under npm scripts and npx,
 * node_modules/.bin comes first in PATH, and there `nft` is @vercel/nft (a
 * file tracer ava depends on), which accepts these arguments and does nothing.
 */
const NFT = ['/usr/sbin/nft', '/sbin/nft', '/usr/bin/nft'].find((p) => existsSync(p));
const run = (args: string[]): Promise<unknown> => exec(NFT ?? 'nft', args);

/** Why a partition cannot be made here, or null when it can (decided once, at module load). */
export const partitionUnavailable: string | null = await (async () => {
  if (process.getuid?.() !== 0) return 'nftables partitions need root';
  if (NFT === undefined) return 'the nft tool (Debian package nftables) is not installed';
  const probe = `rblk_probe_${randomBytes(4).toString('hex')}`;
  try {
    await run(['add', 'table', 'inet', probe]);
    await run(['delete', 'table', 'inet', probe]);
    return null;
  } catch (e) {
    return `nft cannot add a table here: ${(e as Error).message.split('\n')[0]}`;
  }
})();

export interface Partition {
  /** Starts dropping new connections to the port. */
  cut(): Promise<void>;
  /** Lets them through again. */
  heal(): Promise<void>;
}

export async function partition(t: ExecutionContext, port: number): Promise<Partition> {
  const table = `rblk_test_${randomBytes(4).toString('hex')}`;
  await run(['add', 'table', 'inet', table]);
  t.teardown(async () => {
    await run(['delete', 'table', 'inet', table]);
  });
  await run(['add', 'chain', 'inet', table, 'out', '{ type filter hook output priority 0 ; }']);
  return {
    async cut() {
      await run(['add', 'rule', 'inet', table, 'out', 'oifname', 'lo', 'tcp', 'dport', String(port), 'tcp', 'flags', '&', '(syn|ack)', '==', 'syn', 'drop']);
    },
    async heal() {
      await run(['flush', 'chain', 'inet', table, 'out']);
    },
  };
}
