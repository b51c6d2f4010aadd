// nvme+tcp URLs: nvme+tcp://host[:port][,host2[:port]...]/<subsystem NQN>[?hostnqn=...&digest=header,data&queues=N&sqflow=off&nsid=N]
// Several comma-separated addresses are several paths to one subsystem, in
// order of preference (docs/nvme.md "The rblk library as an NVMe/TCP host").
// As for rblk:// URLs (initiator/url.ts), a URL carries no secret.
import { DISCOVERY_NQN } from '../../protocol/nvme/command.js';

/** IANA's NVMe/TCP port (NVMe TCP Transport 1.0 §3.2). */
export const NVME_TCP_PORT = 4420;
/** The port a discovery controller is conventionally on (TCP 1.0 §3.2: 8009). */
export const NVME_DISCOVERY_PORT = 8009;

export interface NvmeUrl {
  paths: { address: string; port: number }[];
  /** The subsystem NQN in the path; the discovery NQN when the path is empty. */
  subnqn: string;
  hostnqn?: string;
  digests: { header: boolean; data: boolean };
  queues?: number;
  /** `sqflow=off`: SQ flow control disabled on the I/O queues (session.ts). */
  disableSqFlowControl?: boolean;
  /** `nsid=N`: the namespace session.open() opens without an argument (and the CLI's volume); 1 when absent. */
  nsid?: number;
}

export function isNvmeUrl(text: string): boolean {
  return /^nvme\+tcp:\/\//i.test(text);
}

/** Parses an nvme+tcp URL; RangeError for anything it cannot take. */
export function parseNvmeUrl(text: string): NvmeUrl {
  const m = /^nvme\+tcp:\/\/([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(text);
  if (!m) throw new RangeError(`"${text}" is not an nvme+tcp:// URL (nvme+tcp://host[:port]/<subsystem NQN>)`);
  if (m[1].includes('@')) throw new RangeError('nvme+tcp URLs carry no user or secret');
  const hosts = m[1].split(',');
  if (hosts.some((h) => h === '')) throw new RangeError(`"${text}" names no host, or an empty one between commas`);
  const paths = hosts.map((h) => {
    // [v6]:port, v4:port, name:port, or without a port.
    const hm = /^\[([^\]]+)\](?::(\d+))?$/.exec(h) ?? /^([^:[\]]+)(?::(\d+))?$/.exec(h);
    if (!hm) throw new RangeError(`"${h}" in "${text}" is not host[:port] (IPv6 in brackets)`);
    const port = hm[2] === undefined ? NVME_TCP_PORT : Number(hm[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${hm[2]} in "${text}"`);
    return { address: hm[1], port };
  });
  const seen = new Set(paths.map((p) => `${p.address}:${p.port}`));
  if (seen.size !== paths.length) throw new RangeError(`"${text}" names an address twice`);
  const path = decodeURIComponent((m[2] ?? '').replace(/^\//, ''));
  if (path.includes('/')) throw new RangeError(`"${text}": the path is one subsystem NQN`);
  if (path !== '' && !path.startsWith('nqn.')) throw new RangeError(`"${path}" is not an NQN (nqn.yyyy-mm.<domain>:<name>, Base 2.0 §4.5)`);
  const out: NvmeUrl = { paths, subnqn: path === '' ? DISCOVERY_NQN : path, digests: { header: false, data: false } };
  for (const [k, v] of new URLSearchParams(m[3] ?? '')) {
    if (k === 'hostnqn') {
      if (!v.startsWith('nqn.')) throw new RangeError(`hostnqn "${v}" is not an NQN`);
      out.hostnqn = v;
    } else if (k === 'digest') {
      for (const d of v.split(',')) {
        if (d === 'header') out.digests.header = true;
        else if (d === 'data') out.digests.data = true;
        else if (d !== 'none' && d !== '') throw new RangeError(`digest "${d}": header, data or none`);
      }
    } else if (k === 'queues') {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 64) throw new RangeError(`queues ${v} is not an integer in 1..64`);
      out.queues = n;
    } else if (k === 'sqflow') {
      if (v !== 'on' && v !== 'off') throw new RangeError(`sqflow ${v}: on or off`);
      out.disableSqFlowControl = v === 'off';
    } else if (k === 'nsid') {
      const n = Number(v);
      // NSID 0 and FFFFFFFFh are not namespaces (Base 2.0 §3.2.1.2).
      if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1 || n > 0xfffffffe) throw new RangeError(`nsid ${v} is not an integer in 1..4294967294`);
      out.nsid = n;
    } else throw new RangeError(`"${text}": unknown parameter "${k}" (known: hostnqn, digest, queues, sqflow, nsid)`);
  }
  return out;
}
