// `rblk info URL`: what the target says about one volume (READ CAPACITY(16),
// VPD 80h/83h/B0h, the mode header's WP bit) and the session's transfer limit.
import type { Argv } from 'yargs';
import { fields, json } from '../output.js';
import { formatBytes } from '../size.js';
import { connectionOptions, withVolume } from '../target-args.js';
import { VERBS } from '../verbs.js';

export function infoCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.info.command,
    VERBS.info.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port][,host[:port]...]/VOLUME[?provider=P]' })
        .options(connectionOptions)
        .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' }),
    async (a) => {
      const text = await withVolume(a.url, a, async (vol, session) => {
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
