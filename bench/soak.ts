// The fault campaign (docs/reliability.md): kills and SIGTERMs of rblkd under each initiator
// path, capsule fuzzing with disconnects at every protocol step, partitions on loopback,
// session churn, a full and a shrunken backing store. Prints what it tried and what it lost.
//   npm run soak -- [--quick] [--kills N] [--fuzz N] [--churn N] [--idle N] [--only a,b]
// Writes bench/out/soak.{md,json}.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseSoakArgs, runSoak, type SoakArgs } from './soak/campaign.js';
import { killAllChildren, ROOT } from './soak/processes.js';
import { markdownTable } from './soak/report.js';

// A soak stopped half-way still removes its nft tables (nft.ts) and its rblkd and rblk children.
process.on('exit', killAllChildren);
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));

let args: SoakArgs;
try {
  args = parseSoakArgs(process.argv.slice(2));
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(64);
}
const out = join(ROOT, 'bench', 'out');
mkdirSync(out, { recursive: true });
const command = `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim();
// The table so far, after every scenario: a long soak that is stopped still leaves its rows.
const rows = await runSoak(args, (line) => console.error(line), (sofar) => writeFileSync(join(out, 'soak.partial.md'), `\`${command}\`\n\n${markdownTable(sofar)}\n`));
const table = markdownTable(rows);
console.log(table);
writeFileSync(join(out, 'soak.md'), `${new Date().toISOString()}\n\n\`${command}\`\n\n${table}\n`);
writeFileSync(join(out, 'soak.json'), JSON.stringify({ date: new Date().toISOString(), command, args, rows }, null, 2));
process.exitCode = rows.every((r) => r.ok) ? 0 : 1;
