// What the soak's fuzzers (capsule-fuzz.ts over the rblk wire, nvme-fuzz.ts over NVMe/TCP)
// share: the options that shape a run and the tally of what happened, so that both report
// the same way (docs/architecture.md "The test kit").

/** How a fuzzing run is shaped, whatever it sends. */
export interface FuzzRunOptions {
  /** Fuzzing connections at once (4 unless given). */
  parallel?: number;
  /** Commands per streaming connection before it ends. */
  perConnection?: number;
  seed?: number;
  /** Stop after this long even if fewer units went out (reported). */
  budgetMs?: number;
  log?: (line: string) => void;
}

/** The default time budget of a run: 10 minutes. */
export const FUZZ_BUDGET_MS = 600_000;

/** What every fuzzer counts: connections per protocol step, commands never answered, the first few errors. */
export interface FuzzTally<Step extends string> {
  connections: number;
  steps: Map<Step, number>;
  /** Commands on a connection the target kept open and never answered. */
  unanswered: number;
  errors: string[];
}

export function newTally<Step extends string>(): FuzzTally<Step> {
  return { connections: 0, steps: new Map(), unanswered: 0, errors: [] };
}

/** One connection started at a step. */
export function countStep<Step extends string>(t: FuzzTally<Step>, step: Step): void {
  t.connections++;
  t.steps.set(step, (t.steps.get(step) ?? 0) + 1);
}

/** Keeps the first five distinct errors: enough to say what went wrong, never a flood. */
export function note(t: { errors: string[] }, msg: string): void {
  if (t.errors.length < 5 && !t.errors.includes(msg)) t.errors.push(msg);
}

/** The report lines every fuzzer adds to its row: the budget reached, connections per step. */
export function tallyNotes<Step extends string>(t: FuzzTally<Step>, o: FuzzRunOptions, sent: number, wanted: number, unit: string): string[] {
  const notes: string[] = [];
  if (sent < wanted) notes.push(`time budget of ${((o.budgetMs ?? FUZZ_BUDGET_MS) / 1000).toFixed(0)} s reached at ${sent} of ${wanted} ${unit}`);
  notes.push(`${t.connections} connections (${[...t.steps].map(([s, n]) => `${s} ${n}`).join(', ')})`);
  return notes;
}
