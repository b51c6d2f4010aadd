// The backing store failing under a served volume (bench/soak/backing.ts): a full
// filesystem gives NO_SPACE and loses nothing acknowledged; a file truncated underneath
// gives MEDIUM_ERROR past its new end and its data before it.
import test from 'ava';
import { fullFilesystem, truncatedFile } from '../../bench/soak/backing.js';

// Mounting the tmpfs needs root; without it the test is reported as skipped.
const asRoot = process.getuid?.() === 0 ? test.serial : test.skip;

asRoot('a full backing filesystem: writes fail NO_SPACE, allocated blocks stay writable, nothing acknowledged is lost', async (t) => {
  t.timeout(120_000);
  const row = await fullFilesystem();
  t.log(row.notes.join('; '));
  t.is(row.lost, 0, 'acknowledged writes lost');
  t.is(row.daemonExits, 0, 'rblkd exits');
  t.is(row.healthyErrors, 0, 'errors other than NO_SPACE');
  t.regex(row.notes[0], /NO_SPACE ×\d+/);
  t.true(row.ok, row.notes.join('; '));
});

test.serial('a backing file truncated underneath: MEDIUM_ERROR past the new end, the data before it intact', async (t) => {
  t.timeout(120_000);
  const row = await truncatedFile();
  t.log(row.notes.join('; '));
  t.is(row.lost, 0, 'blocks before the new end that changed');
  t.is(row.healthyErrors, 0, 'answers that differ from docs/');
  t.is(row.daemonExits, 0, 'rblkd exits');
  t.regex(row.notes[0], /MEDIUM_ERROR ×\d+/);
});
