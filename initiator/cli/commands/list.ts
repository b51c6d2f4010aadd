// `rblk list`: the attachments recorded in the state directory (mounts and
// FUSE attaches), and whether the process serving each still runs.
import type { Argv } from 'yargs';
import { readAttachmentRecords } from '../../fuse/attachment-record.js';
import { json, table } from '../output.js';
import { isRunning } from '../../process-state.js';
import { formatBytes } from '../size.js';
import { stateDir, stateDirOption } from '../state-dir.js';
import { VERBS } from '../verbs.js';

export function listCommand<T>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.list.command,
    VERBS.list.describe,
    (b) => b.options(stateDirOption).option('json', { type: 'boolean', default: false, describe: 'print one JSON object' }),
    async (a) => {
      const { records, problems } = await readAttachmentRecords(stateDir(a));
      for (const p of problems) process.stderr.write(`rblk: warning: ${p.path}: ${p.reason}\n`);
      const rows = records.map((r) => ({ ...r, state: isRunning(r.pid) ? 'active' : 'stale' }));
      if (a.json) {
        process.stdout.write(json({ attachments: rows }));
        return;
      }
      if (rows.length === 0) {
        process.stdout.write('no attachments\n');
        return;
      }
      const lines = [['ID', 'KIND', 'PID', 'STATE', 'SIZE', 'VOLUME', 'DEVICE', 'MOUNTPOINT']];
      for (const r of rows) {
        const where = r.kind === 'mount' ? `${r.mountpoint ?? '-'}${r.fsType === null ? '' : ` (${r.fsType})`}` : '-';
        lines.push([r.id, r.kind, String(r.pid), r.state, formatBytes(r.size), r.label ?? '-', r.loopDevice ?? r.file, where]);
      }
      process.stdout.write(table(lines));
    },
  );
}
