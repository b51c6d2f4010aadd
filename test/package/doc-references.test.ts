// The comments and docs point inside the repository, and what they point at is
// there (the package ships docs/, so a user follows these too): every
// `docs/NAME.md "Section"` names a file of docs/ that has that section, as a
// heading, a bold paragraph lead, a list item's lead or a table column; and no
// tracked file cites a DESIGN.md or a path outside the checkout.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../daemon/helpers/daemon-process.js';

const listed = spawnSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' });
const tracked = listed.status === 0 ? listed.stdout.split('\0').filter((f) => f !== '' && existsSync(join(ROOT, f))) : [];
const texts = tracked.filter((f) => /\.(ts|js|cc|h|md|sh|yaml|txt|service|conf)$|^CMakeLists\.txt$/.test(f) && f !== 'package-lock.json');
const run = tracked.length > 0 ? test : test.skip;

/** Whether `doc` has `title` as something a reader can find by eye: a heading, a bold lead, a list lead or a table header. */
function hasSection(doc: string, title: string): boolean {
  const t = title.toLowerCase();
  return doc.split('\n').some((line) => {
    const l = line.toLowerCase();
    return (
      (l.startsWith('#') && l.includes(t)) ||
      l.includes(`**${t}`) ||
      l.includes(`**\`${t}\``) ||
      l.startsWith(`- ${t}:`) ||
      (l.startsWith('|') && l.includes(`| ${t} |`))
    );
  });
}

run('every docs/NAME.md "Section" cited names a section that exists', (t) => {
  const broken: string[] = [];
  let cited = 0;
  for (const f of texts) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const m of text.matchAll(/docs\/([a-z-]+\.md),? "([^"\n]+)"/g)) {
      cited++;
      const doc = join(ROOT, 'docs', m[1]!);
      if (!existsSync(doc)) broken.push(`${f}: docs/${m[1]} does not exist`);
      else if (!hasSection(readFileSync(doc, 'utf8'), m[2]!)) broken.push(`${f}: docs/${m[1]} has no section "${m[2]}"`);
    }
  }
  t.true(cited > 50, `only ${cited} citations found: is the pattern still right?`);
  t.deepEqual(broken, []);
});

run('nothing cites a DESIGN.md or a path outside the repository', (t) => {
  const outside: string[] = [];
  for (const f of texts) {
    const lines = readFileSync(join(ROOT, f), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (/DESIGN\.md|\.\.\/shared\b|\/work\/|\/home\/[a-z]/.test(line) && f !== 'test/package/doc-references.test.ts') outside.push(`${f}:${i + 1}: ${line.trim()}`);
    });
  }
  t.deepEqual(outside, []);
});

run('every repository file path cited in a comment or a doc exists', (t) => {
  const broken: string[] = [];
  let cited = 0;
  const outputDirs = readFileSync(join(ROOT, '.gitignore'), 'utf8')
    .split('\n')
    .filter((l) => /^[\w.-]+(\/[\w.-]+)*\/$/.test(l) && l.includes('/') && l.split('/').length > 2);
  t.true(outputDirs.includes('bench/out/'), 'bench/out/ is no longer ignored: is the output directory elsewhere?');
  const top = '(?:native|target|initiator|protocol|config|bench|test|bin-src|bin|scripts|systemd|docs|examples)';
  const re = new RegExp(`(?<![\\w./-])(${top}/[\\w./-]*[\\w-]\\.(?:ts|cc|h|md|sh|yaml|service|conf|py|c))(?![\\w/])`, 'g');
  for (const f of texts) {
    const lines = readFileSync(join(ROOT, f), 'utf8').split('\n');
    lines.forEach((line, i) => {
      // Import specifiers are the compiler's to check; a glob or a placeholder names no one file.
      if (/^\s*(import|export)\b.*from\s/.test(line) || /\bimport\(/.test(line)) return;
      for (const m of line.matchAll(re)) {
        const path = m[1]!;
        // A placeholder (test/x.test.ts), a glob, or a system header (<systemd/sd-daemon.h>) names no file of ours.
        if (/[*<>]|NAME|\.\.\.|^test\/x\./.test(path) || line.includes(`<${path}>`)) continue;
        // A run's output (bench/out/soak.md) is written by the run, and .gitignore keeps it out of a checkout.
        if (outputDirs.some((d) => path.startsWith(d))) continue;
        cited++;
        if (!existsSync(join(ROOT, path))) broken.push(`${f}:${i + 1}: ${path}`);
      }
    });
  }
  t.true(cited > 100, `only ${cited} paths found: is the pattern still right?`);
  t.deepEqual(broken, []);
});
