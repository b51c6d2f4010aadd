// README as a new user reads it (issue 28 §4): it names every document under
// docs/, and each `rblk …` line of its examples (and of docs/cli.md's) is a
// command line the CLI accepts. The lines are parsed dry: the real parser
// (initiator/cli/main.ts buildParser, with yargs' validation and the commands'
// checks), with every command's handler swapped for one that only says it
// was reached (yargs' internal command table: a middleware would run before
// the commands' own .check()).
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildParser } from '../../initiator/cli/main.js';
import { ROOT } from '../cli/helpers/cli.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

class DryRun extends Error {}

/** The `rblk …` lines of a markdown file's sh blocks, comments removed, split into words. */
function rblkLines(markdown: string): string[][] {
  const lines: string[][] = [];
  for (const block of markdown.matchAll(/```(?:sh|bash|console)?\n([\s\S]*?)```/g)) {
    for (const line of block[1].split('\n')) {
      // The command alone: no prompt, sudo, comment, pipe or redirection.
      const cmd = line.replace(/^\s*(?:\$|#)?\s*(?:sudo\s+)?/, '').replace(/\s+(?:#|\||>|<|&&).*$/, '').trim();
      if (/^rblk\s/.test(cmd)) lines.push(cmd.split(/\s+/).slice(1));
    }
  }
  return lines;
}

/** Resolves 'accepted' when the line would reach its handler, else the error the user would see. */
async function dryParse(args: string[]): Promise<string> {
  try {
    const parser = await buildParser(args, '0.0.0');
    const internal = parser as unknown as { getInternalMethods(): { getCommandInstance(): { getCommandHandlers(): Record<string, { handler: () => void }> } } };
    for (const h of Object.values(internal.getInternalMethods().getCommandInstance().getCommandHandlers())) {
      h.handler = () => {
        throw new DryRun();
      };
    }
    await parser.parseAsync();
    return 'no handler reached';
  } catch (e) {
    if (e instanceof DryRun) return 'accepted';
    return e instanceof Error ? e.message : String(e);
  }
}

test('README lists every docs/*.md', (t) => {
  const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md'));
  t.true(docs.length >= 14, `${docs.length} documents under docs/`);
  t.deepEqual(
    docs.filter((f) => !README.includes(`docs/${f}`)),
    [],
    'documents README does not name',
  );
});

test('README shows rblk mount with --mkfs, and with what it needs', (t) => {
  const mounts = rblkLines(README).filter((a) => a[0] === 'mount');
  t.true(mounts.length > 0, 'README has an rblk mount example');
  t.true(mounts.some((a) => a.includes('--mkfs')));
});

for (const [file, min] of [
  ['README.md', 5],
  ['docs/cli.md', 10],
] as const) {
  test(`every rblk command line in ${file} is accepted by the CLI's parser`, async (t) => {
    const lines = rblkLines(readFileSync(join(ROOT, file), 'utf8')).filter((a) => !a.includes('--help') && !a.includes('-h'));
    t.true(lines.length >= min, `${lines.length} rblk lines found in ${file}`);
    const refused: string[] = [];
    for (const args of lines) {
      const said = await dryParse(args);
      if (said !== 'accepted') refused.push(`rblk ${args.join(' ')}: ${said}`);
    }
    t.deepEqual(refused, []);
  });
}

test('the dry parse refuses what the CLI refuses', async (t) => {
  t.regex(await dryParse(['mount', 'rblk://127.0.0.1/demo', '/mnt/demo', '--mkfs', 'ext4']), /--mkfs ext4 destroys the data on the volume: pass --yes/);
  t.regex(await dryParse(['mount', 'rblk://127.0.0.1/demo']), /^rblk mount needs the mount point DIR \(see --help\)$/);
  t.regex(await dryParse(['bench', 'rblk://127.0.0.1/demo', '--qdepth', '3']), /unknown option --qdepth/);
  t.is(await dryParse(['mount', 'rblk://127.0.0.1/demo', '/mnt/demo', '--mkfs', 'ext4', '--yes']), 'accepted');
});
