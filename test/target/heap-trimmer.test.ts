// The heap trimmer (target/heap-trimmer.ts): however many connections end, one
// malloc_trim follows; a closed server trims nothing; the real call works here.
import test from 'ava';
import { addon } from '../../native/binding.js';
import { HeapTrimmer } from '../../target/heap-trimmer.js';
import { collectAll, collectYoung, JS_HEAP_SAMPLE_GAP_MS } from '../../target/js-heap.js';
import { getHeapSpaceStatistics } from 'node:v8';
import { until } from '../../bench/kit/wait.js';

test('a thousand releases in a burst cause one trim', async (t) => {
  let trims = 0;
  const h = new HeapTrimmer(() => {
    trims++;
    return true;
  });
  for (let i = 0; i < 1000; i++) h.noteRelease();
  await until(() => trims > 0, 'trims > 0');
  t.is(trims, 1);
  // A later release schedules the next one.
  h.noteRelease();
  await until(() => trims > 1, 'trims > 1');
  t.is(trims, 2);
  h.close();
});

test('close cancels a pending trim', async (t) => {
  let trims = 0;
  const h = new HeapTrimmer(
    () => {
      trims++;
      return true;
    },
    undefined,
    undefined,
    { trimMs: 10 },
  );
  h.noteRelease();
  h.close();
  // Node runs timers in order of expiry: had close left the 10 ms trim armed, it would run before this one.
  await new Promise((r) => setTimeout(r, 20));
  t.is(trims, 0);
});

test('the native trim runs and says whether memory went back', (t) => {
  t.is(typeof addon().trimHeap(), 'boolean');
});

test('once a burst of releases is over, V8 collects twice, sampleGapMs apart, and a trim follows', async (t) => {
  const calls: string[] = [];
  const h = new HeapTrimmer(
    () => (calls.push('trim'), true),
    () => (calls.push('young'), true),
    () => (calls.push('all'), true),
    { trimMs: 10, settleMs: 100, settleMaxMs: 60_000, sampleGapMs: 100 },
  );
  t.teardown(() => h.close());
  for (let i = 0; i < 1000; i++) h.noteRelease();
  await until(() => calls.length >= 4, 'calls.length >= 4');
  t.deepEqual(calls, ['trim', 'young', 'all', 'trim']);
});

test('a release between the two collections starts over: the burst was not over', async (t) => {
  const calls: string[] = [];
  const h = new HeapTrimmer(
    () => true,
    () => (calls.push('young'), true),
    () => (calls.push('all'), true),
    { trimMs: 10, settleMs: 50, settleMaxMs: 60_000, sampleGapMs: 60_000 },
  );
  t.teardown(() => h.close());
  h.noteRelease();
  await until(() => calls.length >= 1, 'calls.length >= 1');
  t.deepEqual(calls, ['young']);
  // The full collection is a minute of sampleGapMs away; a release cancels it and settles again.
  h.noteRelease();
  await until(() => calls.length >= 2, 'calls.length >= 2');
  t.deepEqual(calls, ['young', 'young']);
});

test('a steady churn defers the collections, but not past settleMaxMs from its first release', async (t) => {
  let collects = 0;
  let releases = 0;
  const h = new HeapTrimmer(
    () => true,
    () => (collects++, true),
    () => true,
    { trimMs: 10, settleMs: 200, settleMaxMs: 600, sampleGapMs: 60_000 },
  );
  t.teardown(() => h.close());
  // A release every 20 ms, ten times closer than settleMs: the settle is pushed back each time,
  // until settleMaxMs; releases are counted so the check is on how many came, not on the clock.
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      if (collects > 0 || releases > 1000) {
        clearInterval(tick);
        resolve();
        return;
      }
      releases++;
      h.noteRelease();
    }, 20);
  });
  t.is(collects, 1);
  t.true(releases > 5, `the collection waited for the churn (${releases} releases came first)`);
});

test.serial('the real collections give back the young generation a burst grew', async (t) => {
  const newSpace = (): number => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.physical_space_size ?? 0;
  // A burst of short-lived objects, as a churn of logins makes, with some kept for a while.
  let kept: object[] = [];
  for (let i = 0; i < 3_000_000; i++) {
    const o = { i, s: `x${i}` };
    if (i % 50 === 0) kept.push(o);
    if (kept.length > 20_000) kept = [];
  }
  const grown = newSpace();
  t.true(grown >= 8 * 2 ** 20, `the burst grew the young generation (${grown} bytes)`);
  // As the trimmer does once the burst is over: a young collection, then a full one after the gap.
  t.true(collectYoung());
  await new Promise((r) => setTimeout(r, JS_HEAP_SAMPLE_GAP_MS));
  t.true(collectAll());
  const after = newSpace();
  t.log(`new space ${(grown / 2 ** 20).toFixed(1)} MiB after the burst, ${(after / 2 ** 20).toFixed(1)} MiB after the collections; ${kept.length} kept`);
  t.true(after <= grown / 4, `${after} bytes, from ${grown}`);
});
