import test from 'ava';
import { accessFor, globMatch } from '../../config/acl.js';

test('globs match whole names with * and ? only', (t) => {
  t.true(globMatch('backup-*', 'backup-01'));
  t.true(globMatch('backup-*', 'backup-'));
  t.false(globMatch('backup-*', 'xbackup-01'));
  t.true(globMatch('host-?', 'host-a'));
  t.false(globMatch('host-?', 'host-ab'));
  t.true(globMatch('iqn.2024-01.com.example:*', 'iqn.2024-01.com.example:db'));
  // '.' is literal, not "any character".
  t.false(globMatch('a.b', 'axb'));
  t.true(globMatch('exact', 'exact'));
  t.false(globMatch('exact', 'exact2'));
});

test('the first matching entry decides; no match means no access', (t) => {
  const volume = {
    readOnly: false,
    acl: [
      { initiator: 'backup-admin', access: 'rw' as const },
      { initiator: 'backup-*', access: 'ro' as const },
    ],
  };
  t.is(accessFor(volume, 'backup-admin'), 'rw');
  t.is(accessFor(volume, 'backup-7'), 'ro');
  t.is(accessFor(volume, 'db-1'), undefined);
  t.is(accessFor({ ...volume, acl: [] }, 'backup-admin'), undefined);
});

test('without an ACL everyone gets rw; a read-only volume caps access at ro', (t) => {
  t.is(accessFor({ readOnly: false }, 'anyone'), 'rw');
  t.is(accessFor({ readOnly: true }, 'anyone'), 'ro');
  t.is(accessFor({ readOnly: true, acl: [{ initiator: '*', access: 'rw' }] }, 'x'), 'ro');
});
