// Soak checks that find defects being fixed on other branches (docs/reliability.md "Known
// defects") run only with RBLK_SOAK_FIXED=1; without it they are reported as skipped, never
// as passed. Everything else in test/soak/ always runs.
import test from 'ava';

export const FIXED = process.env.RBLK_SOAK_FIXED === '1';

/** `test` when the fixes are in (RBLK_SOAK_FIXED=1), else `test.skip`. */
export const afterFixes = FIXED ? test.serial : test.skip;
