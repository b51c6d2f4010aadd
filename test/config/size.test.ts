import test from 'ava';
import { formatSize, parseSize } from '../../config/size.js';

test('sizes in bytes and with binary and decimal units', (t) => {
  const cases: Array<[number | string, number]> = [
    [4096, 4096],
    ['4096', 4096],
    ['512MiB', 512 * 1024 ** 2],
    ['1GiB', 1024 ** 3],
    ['1 GiB', 1024 ** 3],
    ['1.5GiB', 1.5 * 1024 ** 3],
    ['4k', 4096],
    ['4K', 4096],
    ['256M', 256 * 1024 ** 2],
    ['10GB', 10 * 1000 ** 3],
    ['1kB', 1000],
    ['2TiB', 2 * 1024 ** 4],
    ['0', 0],
  ];
  for (const [input, bytes] of cases) t.deepEqual(parseSize(input), { ok: true, bytes }, String(input));
});

test('bad sizes say why', (t) => {
  t.deepEqual(parseSize('12XB'), {
    ok: false,
    message: "invalid size '12XB' (write bytes, or a number with a unit such as 512MiB, 1GiB, 10GB)",
    reason: 'invalid',
  });
  t.false(parseSize('GiB').ok);
  t.false(parseSize('-1MiB').ok);
  t.false(parseSize('1 2MiB').ok);
  t.deepEqual(parseSize('1.3'), { ok: false, message: "size '1.3' is not a whole number of bytes, or is too large", reason: 'inexact' });
  t.deepEqual(parseSize('9999999PiB'), {
    ok: false,
    message: "size '9999999PiB' is not a whole number of bytes, or is too large",
    reason: 'inexact',
  });
  t.deepEqual(parseSize(-5), { ok: false, message: 'must be a whole number of bytes, not -5', reason: 'inexact' });
});

test('formatSize is exact', (t) => {
  t.is(formatSize(256 * 1024 * 1024), '256 MiB');
  t.is(formatSize(1.5 * 1024 ** 3), '1.5 GiB');
  t.is(formatSize(1000), '1000 bytes');
  t.is(formatSize(6144), '6 KiB');
  t.is(formatSize(1024 * 1024 + 1), '1048577 bytes');
});
