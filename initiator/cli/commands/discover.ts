// `rblk discover HOST[:PORT]`: REPORT LUNS and a probe of each LUN (SPC-5
// 6.33, 6.7), as Session.volumes() does, printed one volume a line.
// `rblk discover nvme+tcp://HOST[:PORT]`: the NVMe-oF Discovery Log Page
// (NVMe-oF 1.1 §5.4) of the discovery controller there, one entry a line;
// without a port, 8009 (the discovery port, TCP 1.0 §3.2) and then 4420.
// With a subsystem NQN in the path: that subsystem's namespaces.
import type { Argv } from 'yargs';
import type { VolumeInfo } from '../../discovery.js';
import { json, table } from '../output.js';
import { formatBytes } from '../size.js';
import { connectionOptions, connectOptions, hostPort, hostToUrl, openSession, parseUrl } from '../target-args.js';
import { VERBS } from '../verbs.js';
import { UsageError } from '../cli-error.js';

async function discoverNvmeCommand(text: string, asJson: boolean, connectMs: number | undefined): Promise<void> {
  const { discoverNvme } = await import('../../nvme/discovery.js');
  const { defaultHostIdentity } = await import('../../nvme/session.js');
  const { parseNvmeUrl } = await import('../../nvme/url.js');
  let u;
  try {
    u = parseNvmeUrl(text);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { DISCOVERY_NQN } = await import('../../../protocol/nvme/command.js');
  if (u.subnqn !== DISCOVERY_NQN) return listNamespaces(text, asJson, connectMs);
  const id = defaultHostIdentity();
  const hostnqn = u.hostnqn ?? id.hostnqn;
  const { address } = u.paths[0];
  // No port in the URL: the discovery port first, then the I/O port (rblkd answers discovery on every NVMe/TCP listener).
  const ports = /^nvme\+tcp:\/\/(\[[^\]]+\]|[^/:?,]+)(?:[/?]|$)/i.test(text) ? [8009, u.paths[0].port] : [u.paths[0].port];
  let log: Awaited<ReturnType<typeof discoverNvme>> | null = null;
  let port = ports[0];
  for (const p of ports) {
    port = p;
    try {
      log = await discoverNvme({ address, port: p, hostnqn, hostid: id.hostid, connectTimeoutMs: connectMs });
      break;
    } catch (e) {
      if (p === ports[ports.length - 1]) throw e;
    }
  }
  const entries = log!.entries;
  const where = `${address.includes(':') ? `[${address}]` : address}:${port}`;
  if (asJson) {
    process.stdout.write(json({ target: where, genctr: String(log!.genctr), entries: entries.map((e) => ({ ...e })) }));
    return;
  }
  if (entries.length === 0) {
    process.stdout.write(`no discovery log entries at ${where}\n`);
    return;
  }
  const trtype = (n: number): string => ({ 1: 'rdma', 2: 'fc', 3: 'tcp', 254: 'loop' })[n] ?? String(n);
  const rows = [['TRTYPE', 'ADRFAM', 'SUBTYPE', 'PORTID', 'TRSVCID', 'TRADDR', 'SUBNQN', 'URL']];
  for (const e of entries) {
    rows.push([trtype(e.trtype), e.adrfam === 2 ? 'ipv6' : e.adrfam === 1 ? 'ipv4' : String(e.adrfam), e.subtype === 2 ? 'nvm' : e.subtype === 3 ? 'discovery' : String(e.subtype), String(e.portid), e.trsvcid, e.traddr, e.subnqn, e.url ?? '-']);
  }
  process.stdout.write(table(rows));
}

/**
 * The URL that names one volume of the target, with what the user chose to reach it: the provider,
 * and the target and initiator names when given (a URL without them would ask for the defaults,
 * and be refused by a target of another name, or see another initiator's volumes).
 */
function volumeUrl(base: string, chosen: { provider?: string | undefined; targetName?: string | undefined; initiatorName?: string | undefined }, name: string): string {
  // A query may hold ':' as it is (RFC 3986 3.4), so IQNs stay readable.
  const enc = (v: string): string => encodeURIComponent(v).replace(/%3A/gi, ':');
  const q = [
    ['provider', chosen.provider],
    ['initiator', chosen.initiatorName],
    ['target', chosen.targetName],
  ]
    .filter((kv): kv is [string, string] => kv[1] !== undefined)
    .map(([k, v]) => `${k}=${enc(v)}`)
    .join('&');
  return `rblk://${hostPort(parseUrl(base))}/${encodeURIComponent(name)}${q === '' ? '' : `?${q}`}`;
}

/** `discover nvme+tcp://HOST[:PORT]/<NQN>`: the subsystem's active namespaces (Identify CNS 02h, 00h), one a line. */
async function listNamespaces(url: string, asJson: boolean, connectMs: number | undefined): Promise<void> {
  const { NvmeSession } = await import('../../nvme/session.js');
  const s = await NvmeSession.open(url, { queues: 1, timeouts: connectMs === undefined ? {} : { connectMs } });
  let list;
  try {
    list = await s.namespaces();
  } finally {
    await s.close();
  }
  if (asJson) {
    process.stdout.write(json({ subsystem: s.subnqn, host: s.hostnqn, namespaces: list.map((n) => ({ nsid: n.nsid, size: n.blocks * n.blockSize, blockSize: n.blockSize, readOnly: n.writeProtected, thin: n.thin, nguid: n.nguid, anaGroup: n.anaGroup })) }));
    return;
  }
  if (list.length === 0) {
    process.stdout.write(`no namespaces of ${s.subnqn} for ${s.hostnqn}\n`);
    return;
  }
  const rows = [['NSID', 'SIZE', 'BLOCK', 'ACCESS', 'THIN', 'NGUID']];
  for (const n of list) rows.push([String(n.nsid), formatBytes(n.blocks * n.blockSize), String(n.blockSize), n.writeProtected ? 'ro' : 'rw', n.thin ? 'yes' : 'no', n.nguid]);
  process.stdout.write(table(rows));
}

export function discoverCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.discover.command,
    VERBS.discover.describe,
    (b) =>
      b
        .positional('host', { type: 'string', demandOption: true, describe: 'HOST, HOST:PORT, [IPV6]:PORT, rblk://host[:port] or nvme+tcp://host[:port]' })
        .options(connectionOptions)
        .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' })
        .example('$0 discover 10.0.0.5', 'volumes at 10.0.0.5:7471')
        .example('$0 discover 127.0.0.1:7471 --provider tcp --json', '')
        .example('$0 discover nvme+tcp://10.0.0.5:4420', 'the NVMe-oF discovery log at 10.0.0.5:4420')
        .example('$0 discover nvme+tcp://10.0.0.5:4420/nqn.2026-11.com.example:disks', "that subsystem's namespaces"),
    async (a) => {
      if (/^nvme\+tcp:\/\//i.test(a.host)) {
        await discoverNvmeCommand(a.host, a.json, connectOptions(a).timeouts?.connectMs);
        return;
      }
      const url = hostToUrl(a.host);
      const u = parseUrl(url);
      const session = await openSession(url, a);
      let list: VolumeInfo[];
      try {
        list = await session.volumes();
      } finally {
        await session.close();
      }
      const chosen = { provider: a.provider ?? u.provider, targetName: a['target-name'] ?? u.targetName, initiatorName: a['initiator-name'] ?? u.initiatorName };
      if (a.json) {
        process.stdout.write(json({ target: hostPort(u), volumes: list.map((v) => ({ ...v, url: volumeUrl(url, chosen, v.name) })) }));
        return;
      }
      if (list.length === 0) {
        process.stdout.write(`no volumes at ${hostPort(u)} for this initiator\n`);
        return;
      }
      const rows = [['LUN', 'NAME', 'SIZE', 'BLOCK', 'ACCESS', 'URL']];
      for (const v of list) {
        rows.push([String(v.lun), v.name, formatBytes(v.size), String(v.blockSize), v.readOnly ? 'ro' : 'rw', volumeUrl(url, chosen, v.name)]);
      }
      process.stdout.write(table(rows));
    },
  );
}
