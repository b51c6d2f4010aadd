// Several gateways for one volume (docs/initiator.md "Multipath"): the URL
// form rblk://h1:p1,h2:p2/vol and the `paths` option.
import test from 'ava';
import { parseRblkUrl } from '../../initiator/index.js';
import { resolveOptions } from '../../initiator/options.js';
import { identityMismatch } from '../../initiator/paths.js';

test('a URL with comma-separated addresses names every path, the first being address and port', (t) => {
  t.deepEqual(parseRblkUrl('rblk://10.0.0.5:7000,10.0.0.6,[fd00::7]:7002/db?provider=verbs'), {
    address: '10.0.0.5',
    port: 7000,
    volume: 'db',
    provider: 'verbs',
    paths: [
      { address: '10.0.0.5', port: 7000 },
      { address: '10.0.0.6', port: 7471 },
      { address: 'fd00::7', port: 7002 },
    ],
  });
  // One address: no paths field, as before.
  t.false('paths' in parseRblkUrl('rblk://h/v'));
});

test('a multipath URL refuses empty, repeated and secret-carrying addresses', (t) => {
  const refuse = (url: string, message: RegExp) => t.throws(() => parseRblkUrl(url), { instanceOf: RangeError, message });
  refuse('rblk://a,,b/v', /an empty address between commas/);
  refuse('rblk://a:1,a:1/v', /a:1 is named twice/);
  refuse('rblk://a,u:p@b/v', /carry no secrets/);
  refuse('rblk://a,b:notaport/v', /not a valid URL/);
});

test('the paths option: strings or objects, default port, replaces address; resolved options always list the paths', (t) => {
  const o = resolveOptions({ paths: ['h1:7000', { address: 'h2' }, '[::1]:7001'] }, {}, {});
  t.deepEqual(o.paths, [
    { address: 'h1', port: 7000 },
    { address: 'h2', port: 7471 },
    { address: '::1', port: 7001 },
  ]);
  t.like(o, { address: 'h1', port: 7000, pathCheckMs: 2000 });
  t.deepEqual(resolveOptions('rblk://h:9/v', {}, {}).paths, [{ address: 'h', port: 9 }]);
  t.deepEqual(resolveOptions('rblk://h1,h2:8/v', {}, {}).paths, [
    { address: 'h1', port: 7471 },
    { address: 'h2', port: 8 },
  ]);
  t.throws(() => resolveOptions({ paths: ['h1', 'h1:7471'] }, {}, {}), { message: /named twice/ });
  t.throws(() => resolveOptions({ paths: ['h1/vol'] }, {}, {}), { message: /not one host\[:port\]/ });
  t.throws(() => resolveOptions({ paths: [{ address: 'h', port: 70000 }] }, {}, {}), { message: /paths\[0\]\.port/ });
  t.throws(() => resolveOptions({ paths: [] }, {}, {}), { message: /an address is required/ });
});

test('identity: the same NAA at every common LUN, and at least one LUN in common', (t) => {
  const id = (luns: [number, string][]) => ({ luns: new Map(luns), groups: new Map<number, number>() });
  t.is(identityMismatch(id([[0, 'aa'], [1, 'bb']]), id([[0, 'aa']])), undefined);
  t.regex(identityMismatch(id([[0, 'aa']]), id([[0, 'cc']])) ?? '', /LUN 0 is naa\.cc, not naa\.aa: another device/);
  t.regex(identityMismatch(id([[0, 'aa']]), id([[1, 'aa']])) ?? '', /none of the session's logical units/);
});
