// iscsi-test-cu counts a skipped test as passed; the compliance report counts
// from the per-test lines. The fixture is tgt 1.0.85's real output under
// libiscsi-bin 1.19 (`iscsi-test-cu --dataloss --test=ALL`).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { countByFamily, parseTestCu, totals } from '../../bench/compliance/results.js';

const tgt = readFileSync(new URL('../fixtures/iscsi-test-cu-tgt.txt', import.meta.url), 'utf8');

test('tgt: 230 tests, 160 pass, 8 fail, 62 skip (CUnit itself says 222 passed)', (t) => {
  t.deepEqual(totals(parseTestCu(tgt)), { tests: 230, pass: 160, fail: 8, skip: 62 });
});

test('a [FAILED] message in a test CUnit passed is a pass with the message kept', (t) => {
  const r = parseTestCu(tgt).find((x) => x.family === 'WriteSame10' && x.test === 'UnmapVPD');
  t.is(r?.outcome, 'pass');
  t.regex(r?.reasons[0] ?? '', /^failed: WRITESAME10 command failed/);
});

test('failures carry the message and the assertion; families keep their run order', (t) => {
  const results = parseTestCu(tgt);
  const r = results.find((x) => x.family === 'iSCSIdatasn');
  t.is(r?.outcome, 'fail');
  t.true(r?.reasons.some((x) => x.includes('test_iscsi_datasn_invalid.c:98')));
  const fams = countByFamily(results);
  t.is(fams[0].family, 'CompareAndWrite');
  t.deepEqual(fams.find((f) => f.family === 'Sanitize'), { family: 'Sanitize', tests: 11, pass: 0, fail: 0, skip: 11 });
});

test('"...FAILED" on the test line and a test cut short by the summary are read', (t) => {
  const out = 'Suite: A\n  Test: One ...FAILED\n    1. x.c:1  - CU_ASSERT(0)\n  Test: Two ...    [SKIPPED] nope\npassed\nRun Summary: x\n';
  t.deepEqual(
    parseTestCu(out).map((r) => [r.test, r.outcome]),
    [['One', 'fail'], ['Two', 'skip']],
  );
});
