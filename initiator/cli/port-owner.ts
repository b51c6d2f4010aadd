// Who listens on a TCP port, from /proc (proc(5): /proc/net/tcp, /proc/PID/fd),
// so "port in use" can name the program instead of only EADDRINUSE. Best
// effort: another user's process shows no fds to a non-root caller.
import { readdir, readFile, readlink } from 'node:fs/promises';

export interface PortOwner {
  pid: number;
  /** /proc/PID/comm. */
  command: string;
}

const TCP_LISTEN = '0A';

/** Socket inodes listening on `port` (any local address, IPv4 or IPv6). */
async function listeningInodes(port: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = await readFile(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const local = f[1];
      if (f[3] !== TCP_LISTEN) continue;
      if (Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16) !== port) continue;
      out.add(f[9]);
    }
  }
  return out;
}

/** The process listening on `port`, when /proc shows it. */
export async function portOwner(port: number): Promise<PortOwner | undefined> {
  const inodes = await listeningInodes(port);
  if (inodes.size === 0) return undefined;
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d));
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = await readdir(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m !== null && inodes.has(m[1])) {
        const command = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim();
        return { pid: Number(pid), command };
      }
    }
  }
  return undefined;
}
