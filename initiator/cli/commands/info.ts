// `rblk info URL`: what the target says about one volume (READ CAPACITY(16),
// VPD 80h/83h/B0h, the mode header's WP bit) and the session's transfer limit;
// for an nvme+tcp:// URL, what Identify Namespace (Base 2.0 §5.17.2.1) and the
// namespace descriptor list say of the namespace, and each path's controller.
import type { Argv } from 'yargs';
import { fields, json } from '../output.js';
import { formatBytes } from '../size.js';
import { connectionOptions, withAnyVolume, type VolumeAt } from '../target-args.js';
import { VERBS } from '../verbs.js';

export function infoCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.info.command,
    VERBS.info.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port][,host[:port]...]/VOLUME[?provider=P] or nvme+tcp://host[:port][,...]/NQN[?nsid=N]' })
        .options(connectionOptions)
        .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' }),
    async (a) => {
      const text = await withAnyVolume(a.url, a, async (at) => {
        if (at.protocol === 'nvme') return nvmeInfo(at, a.json);
        const { vol, session } = at;
        const provider = session.connections.find((c) => c.up)?.provider ?? 'unknown';
        const i = vol.info;
        const facts = {
          name: vol.name,
          lun: vol.lun,
          size: vol.size,
          blocks: vol.size / vol.blockSize,
          blockSize: vol.blockSize,
          readOnly: vol.readOnly,
          thin: vol.canDiscard,
          serial: vol.serial,
          id: vol.id,
          maxTransfer: vol.maxTransfer,
          provider,
          vendor: i.vendor,
          product: i.product,
          // Each gateway of the volume (docs/initiator.md "Multipath"); one for a single address.
          paths: session.paths,
        };
        if (a.json) return json(facts);
        return fields([
          ['volume', facts.name],
          ['lun', String(facts.lun)],
          ['size', `${formatBytes(facts.size)} (${facts.size} bytes)`],
          ['blocks', String(facts.blocks)],
          ['block size', String(facts.blockSize)],
          ['read-only', facts.readOnly ? 'yes' : 'no'],
          ['thin', facts.thin ? 'yes' : 'no'],
          ['serial', facts.serial],
          ['id', facts.id],
          ['max transfer', `${formatBytes(facts.maxTransfer)} (${facts.maxTransfer} bytes)`],
          ['provider', facts.provider],
          ['vendor', facts.vendor],
          ['product', facts.product],
          ...facts.paths.map((p): [string, string] => [
            `path ${p.index}`,
            `${p.address.includes(':') ? `[${p.address}]` : p.address}:${p.port} ${p.state}, ALUA ${p.alua}${p.group !== undefined ? ` (group ${p.group})` : ''}${p.reason !== undefined ? `: ${p.reason}` : ''}`,
          ]),
        ]);
      });
      process.stdout.write(text);
    },
  );
}

/** `rblk info nvme+tcp://...`: the namespace and its paths, the same layout as a volume's. */
function nvmeInfo({ vol, session }: Extract<VolumeAt, { protocol: 'nvme' }>, asJson: boolean): string {
  const facts = {
    name: vol.name,
    nsid: vol.nsid,
    subsystem: session.subnqn,
    host: session.hostnqn,
    size: vol.size,
    blocks: vol.size / vol.blockSize,
    blockSize: vol.blockSize,
    readOnly: vol.readOnly,
    thin: vol.canDiscard,
    nguid: vol.nguid,
    uuid: vol.uuid,
    maxTransfer: vol.maxTransfer,
    provider: 'nvme-tcp',
    paths: session.paths,
  };
  if (asJson) return json(facts);
  return fields([
    ['namespace', String(facts.nsid)],
    ['subsystem', facts.subsystem],
    ['host', facts.host],
    ['size', `${formatBytes(facts.size)} (${facts.size} bytes)`],
    ['blocks', String(facts.blocks)],
    ['block size', String(facts.blockSize)],
    ['read-only', facts.readOnly ? 'yes' : 'no'],
    ['thin', facts.thin ? 'yes' : 'no'],
    ['nguid', facts.nguid],
    ['uuid', facts.uuid ?? 'none'],
    ['max transfer', `${formatBytes(facts.maxTransfer)} (${facts.maxTransfer} bytes)`],
    ['provider', facts.provider],
    ...facts.paths.map((p, i): [string, string] => [
      `path ${i}`,
      `${p.address.includes(':') ? `[${p.address}]` : p.address}:${p.port} ${p.state}, controller ${p.cntlid ?? 'none'}, ${p.ioQueues} I/O queue(s)${p.ana[facts.nsid] !== undefined ? `, ANA state ${p.ana[facts.nsid]}` : ''}${p.lastError !== null ? `: ${p.lastError}` : ''}`,
    ]),
  ]);
}
