import test from 'ava';
import { parseArgs } from '../../bench/peers.js';

test('--workloads keeps the ids given, from the matrix and the chart depths, and refuses an unknown one', (t) => {
  t.is(parseArgs([]).workloads, null);
  t.deepEqual(parseArgs(['--workloads', 'randread-4k-qd32,randread-4k-qd8']).workloads, ['randread-4k-qd32', 'randread-4k-qd8']);
  t.throws(() => parseArgs(['--workloads', 'randread-4k-qd64']), { message: /--workloads randread-4k-qd64: not one of randread-4k-qd1, .*randread-4k-qd8/ });
  t.throws(() => parseArgs(['--workloads']), { message: '--workloads needs a value' });
});
