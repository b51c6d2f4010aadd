import test from 'ava';
import { RangeLock } from '../../initiator/fuse/range-lock.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

test('overlapping ranges wait; disjoint ranges do not', async (t) => {
  const lock = new RangeLock();
  const order: string[] = [];
  const a = await lock.acquire(0, 4096);
  const b = lock.acquire(2048, 8192).then((rel) => {
    order.push('b');
    return rel;
  });
  const c = lock.acquire(8192, 12288).then((rel) => {
    order.push('c');
    return rel;
  });
  await tick();
  t.deepEqual(order, ['c'], 'the disjoint range went ahead; the overlapping one waits');
  a();
  (await b)();
  (await c)();
  t.deepEqual(order, ['c', 'b']);
  t.is(lock.heldCount, 0);
});

test('a later request does not overtake an earlier overlapping waiter', async (t) => {
  const lock = new RangeLock();
  const order: string[] = [];
  const first = await lock.acquire(0, 100);
  const second = lock.acquire(50, 150).then((rel) => (order.push('second'), rel));
  // Free of what is held, but overlapping the waiting second request.
  const third = lock.acquire(120, 200).then((rel) => (order.push('third'), rel));
  await tick();
  t.deepEqual(order, []);
  first();
  const rel2 = await second;
  await tick();
  t.deepEqual(order, ['second']);
  rel2();
  (await third)();
  t.deepEqual(order, ['second', 'third']);
});

test('release is idempotent', async (t) => {
  const lock = new RangeLock();
  const rel = await lock.acquire(0, 10);
  const other = await lock.acquire(20, 30);
  rel();
  rel();
  t.is(lock.heldCount, 1);
  other();
  t.is(lock.heldCount, 0);
});
