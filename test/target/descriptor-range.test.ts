// descriptorRange: the regions of a descriptor list that hold one byte range
// of the initiator's buffer (what the rblk front end RDMA-reads or writes).
import test from 'ava';
import { descriptorRange } from '../../target/rblk/descriptor-range.js';

const list = [
  { address: 0x1000n, key: 7n, length: 100 },
  { address: 0x9000n, key: 8n, length: 50 },
  { address: 0x4000n, key: 7n, length: 200 },
];

test('from offset 0 it keeps whole regions and shortens the last', (t) => {
  t.deepEqual(descriptorRange(list, 0, 120), [
    { address: 0x1000n, key: 7n, length: 100 },
    { address: 0x9000n, key: 8n, length: 20 },
  ]);
  t.deepEqual(descriptorRange(list, 0, 350), list);
  t.deepEqual(descriptorRange(list, 0, 0), []);
});

test('from an offset it skips whole regions and starts inside the next', (t) => {
  t.deepEqual(descriptorRange(list, 130, 100), [
    { address: 0x9000n + 30n, key: 8n, length: 20 },
    { address: 0x4000n, key: 7n, length: 80 },
  ]);
  t.deepEqual(descriptorRange(list, 150, 10), [{ address: 0x4000n, key: 7n, length: 10 }]);
});

test('a range past the end of the list gives what the list holds', (t) => {
  t.deepEqual(descriptorRange(list, 300, 100), [{ address: 0x4000n + 150n, key: 7n, length: 50 }]);
  t.deepEqual(descriptorRange(list, 400, 10), []);
});
