// `rblk discover HOST[:PORT]`: REPORT LUNS and a probe of each LUN (SPC-5
// 6.33, 6.7), as Session.volumes() does, printed one volume a line.
import type { Argv } from 'yargs';
import type { VolumeInfo } from '../../discovery.js';
import { json, table } from '../output.js';
import { formatBytes } from '../size.js';
import { connectionOptions, hostPort, hostToUrl, openSession, parseUrl } from '../target-args.js';
import { VERBS } from '../verbs.js';

/** The URL that names one volume of the target, with the provider the user chose. */
function volumeUrl(base: string, provider: string | undefined, name: string): string {
  const u = parseUrl(base);
  const q = provider ?? u.provider;
  return `rblk://${hostPort(u)}/${encodeURIComponent(name)}${q === undefined ? '' : `?provider=${encodeURIComponent(q)}`}`;
}

export function discoverCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.discover.command,
    VERBS.discover.describe,
    (b) =>
      b
        .positional('host', { type: 'string', demandOption: true, describe: 'HOST, HOST:PORT, [IPV6]:PORT or rblk://host[:port]' })
        .options(connectionOptions)
        .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' })
        .example('$0 discover 10.0.0.5', 'volumes at 10.0.0.5:7471')
        .example('$0 discover 127.0.0.1:7471 --provider tcp --json', ''),
    async (a) => {
      const url = hostToUrl(a.host);
      const u = parseUrl(url);
      const session = await openSession(url, a);
      let list: VolumeInfo[];
      try {
        list = await session.volumes();
      } finally {
        await session.close();
      }
      const provider = a.provider ?? u.provider;
      if (a.json) {
        process.stdout.write(json({ target: hostPort(u), volumes: list.map((v) => ({ ...v, url: volumeUrl(url, provider, v.name) })) }));
        return;
      }
      if (list.length === 0) {
        process.stdout.write(`no volumes at ${hostPort(u)} for this initiator\n`);
        return;
      }
      const rows = [['LUN', 'NAME', 'SIZE', 'BLOCK', 'ACCESS', 'URL']];
      for (const v of list) {
        rows.push([String(v.lun), v.name, formatBytes(v.size), String(v.blockSize), v.readOnly ? 'ro' : 'rw', volumeUrl(url, provider, v.name)]);
      }
      process.stdout.write(table(rows));
    },
  );
}
