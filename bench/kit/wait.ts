/**
 * Waiting for a condition, the one way tests and benchmarks do it (docs/architecture.md,
 * "The test kit"). A bound here is a guard against a hang, never a timing assertion: a
 * test that passes only because something happened quickly is a defect.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long (default 30 s, inside ava's 60 s timeout). */
  ms?: number;
  /** Poll interval; 0 checks after every turn of the event loop (default 10 ms). */
  everyMs?: number;
}

type Bound = WaitOptions | number;

function options(o: Bound | undefined): Required<WaitOptions> {
  const w = typeof o === 'number' ? { ms: o } : (o ?? {});
  return { ms: w.ms ?? 30_000, everyMs: w.everyMs ?? 10 };
}

async function pause(everyMs: number): Promise<void> {
  if (everyMs === 0) await nextTurn();
  else await sleep(everyMs);
}

/** Resolves with get()'s first value that is not undefined; rejects naming `what` after the bound. */
export async function untilValue<T>(get: () => T | undefined | Promise<T | undefined>, what: string, o?: Bound): Promise<T> {
  const { ms, everyMs } = options(o);
  const end = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await pause(everyMs);
  }
}

/** Resolves once cond() holds; rejects naming `what` after the bound. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, o?: Bound): Promise<void> {
  await untilValue(async () => ((await cond()) ? true : undefined), what, o);
}

/** Whether cond() came to hold within the bound, for callers that report rather than fail. */
export async function eventually(cond: () => boolean | Promise<boolean>, o?: Bound): Promise<boolean> {
  return until(cond, 'a condition', o).then(
    () => true,
    () => false,
  );
}
