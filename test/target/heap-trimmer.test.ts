// The heap trimmer (target/heap-trimmer.ts): however many connections end, one
// malloc_trim follows; a closed server trims nothing; the real call works here.
import test from 'ava';
import { addon } from '../../native/binding.js';
import { HeapTrimmer } from '../../target/heap-trimmer.js';

async function waitFor(cond: () => boolean, boundMs: number): Promise<void> {
  for (let i = 0; i < boundMs / 20 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
}

test('a thousand releases in a burst cause one trim', async (t) => {
  let trims = 0;
  const h = new HeapTrimmer(() => {
    trims++;
    return true;
  });
  for (let i = 0; i < 1000; i++) h.noteRelease();
  await waitFor(() => trims > 0, 10_000);
  t.is(trims, 1);
  // A later release schedules the next one.
  h.noteRelease();
  await waitFor(() => trims > 1, 10_000);
  t.is(trims, 2);
  h.close();
});

test('close cancels a pending trim', async (t) => {
  let trims = 0;
  const h = new HeapTrimmer(() => {
    trims++;
    return true;
  });
  h.noteRelease();
  h.close();
  await new Promise((r) => setTimeout(r, 1500));
  t.is(trims, 0);
});

test('the native trim runs and says whether memory went back', (t) => {
  t.is(typeof addon().trimHeap(), 'boolean');
});
