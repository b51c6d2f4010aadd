// Reading iscsi-test-cu's output (libiscsi's CUnit-based SCSI/iSCSI test
// tool). Each test prints "  Test: NAME ..." under a "Suite: FAMILY" line,
// then any messages, then "passed" or "FAILED" (or "...FAILED" on the same
// line). CUnit has no notion of a skip: a test that skips prints "[SKIPPED]
// reason" and then passes, so its summary counts skips as passes. Here a test
// is failed when CUnit says so, skipped when it printed [SKIPPED], else passed.
// A "[FAILED]" message in a test CUnit passed is kept as a note (tgt's
// WriteSame UnmapVPD does that: the check logs but asserts nothing).

export type Outcome = 'pass' | 'fail' | 'skip';

export interface TestResult {
  readonly family: string;
  readonly test: string;
  readonly outcome: Outcome;
  /** The [SKIPPED] or [FAILED] messages and failed assertions, deduplicated, in order. */
  readonly reasons: readonly string[];
}

export interface FamilyCount {
  readonly family: string;
  readonly tests: number;
  readonly pass: number;
  readonly fail: number;
  readonly skip: number;
}

const TEST_LINE = /^ {2}Test: (\S+) \.\.\.(.*)$/;
const SUITE_LINE = /^Suite: (\S+)/;

export function parseTestCu(output: string): TestResult[] {
  const out: TestResult[] = [];
  let family = '';
  let cur: { family: string; test: string; lines: string[] } | null = null;
  const flush = (): void => {
    if (cur === null) return;
    const body = cur.lines.join('\n');
    // CUnit's verdict: a line "FAILED", or "...FAILED" right after the test name, or its assertion list.
    const failed = cur.lines.some((l, i) => l.trim() === 'FAILED' || (i === 0 && /^FAILED\b/.test(l.trim())) || /^ {4}\d+\. \S+:\d+ +- /.test(l));
    const skipped = body.includes('[SKIPPED]');
    const reasons: string[] = [];
    for (const l of cur.lines) {
      const m = l.match(/\[(SKIPPED|FAILED)\]\s*(.*)$/) ?? l.match(/^ {4}(\d+\. \S+:\d+ +- .*)$/);
      if (!m) continue;
      const r = (m.length === 3 ? `${m[1] === 'FAILED' ? 'failed: ' : ''}${m[2]}` : m[1]).trim();
      if (r && !reasons.includes(r)) reasons.push(r);
    }
    out.push({ family: cur.family, test: cur.test, outcome: failed ? 'fail' : skipped ? 'skip' : 'pass', reasons });
    cur = null;
  };
  for (const raw of output.replace(/\r/g, '').split('\n')) {
    const suite = raw.match(SUITE_LINE);
    if (suite) {
      flush();
      family = suite[1];
      continue;
    }
    const t = raw.match(TEST_LINE);
    if (t) {
      flush();
      cur = { family, test: t[1], lines: [t[2]] };
      continue;
    }
    if (raw.startsWith('Run Summary:')) {
      flush();
      break;
    }
    cur?.lines.push(raw);
  }
  flush();
  return out;
}

/** Per family, in the order the families ran. */
export function countByFamily(results: readonly TestResult[]): FamilyCount[] {
  const m = new Map<string, { tests: number; pass: number; fail: number; skip: number }>();
  for (const r of results) {
    const c = m.get(r.family) ?? { tests: 0, pass: 0, fail: 0, skip: 0 };
    c.tests++;
    c[r.outcome]++;
    m.set(r.family, c);
  }
  return [...m].map(([family, c]) => ({ family, ...c }));
}

export function totals(results: readonly TestResult[]): { tests: number; pass: number; fail: number; skip: number } {
  const t = { tests: results.length, pass: 0, fail: 0, skip: 0 };
  for (const r of results) t[r.outcome]++;
  return t;
}
