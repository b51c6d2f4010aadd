// One timer per connection for every command's timeout (initiator/deadlines.ts):
// commands come due in the order they were sent, one that ended never does,
// and nothing keeps the process alive once no command is outstanding. Serial:
// each test counts the process's active timers.
import test from 'ava';
import { Deadlines } from '../../initiator/deadlines.js';

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test.serial('due in the order added; a deleted key never expires; no timer left after', async (t) => {
  const before = timers();
  const expired: string[] = [];
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  const d = new Deadlines<string>(20, (k) => {
    expired.push(k);
    if (expired.length === 3) done();
  });
  d.add('a');
  d.add('b');
  d.add('c');
  d.add('d');
  t.is(timers(), before + 1, 'one timer for all four');
  d.delete('b');
  await all;
  t.deepEqual(expired, ['a', 'c', 'd']);
  t.is(timers(), before, 'none once nothing is outstanding');
});

test.serial('deleting the last key clears the timer; clear() forgets everything; 0 ms disables', (t) => {
  const before = timers();
  const d = new Deadlines<number>(60_000, () => t.fail('nothing should expire'));
  d.add(1);
  d.add(2);
  d.delete(1);
  t.is(timers(), before + 1);
  d.delete(2);
  t.is(timers(), before);
  d.add(3);
  d.clear();
  t.is(timers(), before);
  const off = new Deadlines<number>(0, () => t.fail('disabled'));
  off.add(1);
  t.is(timers(), before);
});

test.serial('a key added from inside the callback is timed too, with one timer', async (t) => {
  const before = timers();
  const expired: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const d: Deadlines<number> = new Deadlines<number>(10, (k) => {
    expired.push(k);
    if (k === 1) d.add(3);
    if (k === 3) done();
  });
  d.add(1);
  d.add(2);
  await finished;
  t.deepEqual(expired, [1, 2, 3]);
  t.is(timers(), before);
});
