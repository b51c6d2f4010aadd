// Gives back what a burst made V8's heap grow (docs/architecture.md "Memory"). Under load V8
// grows its young generation (32 MiB of new space at Node 20's defaults) and shrinks it only
// at the end of a collection that finds the allocation rate low, over its last 5 s; a process
// gone quiet runs no collection at all, so the space stayed grown for minutes or hours
// (measured: +40% of RSS 240 s after 2,000 logins). Two collections more than 5 s apart do it:
// the first, a scavenge of a few milliseconds, takes the sample that closes the burst; the
// second, a full one, finds a quiet 5 s, shrinks the space and compacts the old generation,
// whose garbage the burst left too. Node gives JavaScript no call
// for a collection but the `gc` function V8 exposes to contexts created once --expose-gc is
// set; this takes it from one such context, for this file alone, and leaves the global object
// as it was.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's window for the allocation rate a collection judges by (GCTracer's kThroughputTimeFrameMs), and a margin. */
export const JS_HEAP_SAMPLE_GAP_MS = 6000;

type Gc = (options?: { type?: 'major' | 'minor' }) => void;

let gc: Gc | null | undefined;

function v8Gc(): Gc | null {
  if (gc === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      const f = runInNewContext('gc') as unknown;
      gc = typeof f === 'function' ? (f as Gc) : null;
    } catch {
      gc = null;
    }
  }
  return gc;
}

/**
 * One young-generation collection (a scavenge): the JavaScript thread stops for it (measured:
 * 1 to 19 ms on this host, depending on its load). False when V8 offers no collection here.
 */
export function collectYoung(): boolean {
  const f = v8Gc();
  if (f === null) return false;
  f({ type: 'minor' });
  return true;
}

/**
 * One full collection (mark-compact, atomic): on a quiet process, JS_HEAP_SAMPLE_GAP_MS after
 * collectYoung(), it shrinks the young generation and compacts the old, returning the pages
 * the burst's garbage held. `gc()` without options, the one form that is a full collection on
 * every Node that has it. False when V8 offers no collection here.
 */
export function collectAll(): boolean {
  const f = v8Gc();
  if (f === null) return false;
  f();
  return true;
}
