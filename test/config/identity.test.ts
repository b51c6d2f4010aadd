import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { identityFile, volumeIdentity } from '../../config/identity.js';
import { tempDir } from './helpers/tmp.js';

test('a configured uuid and serial are used as they are, and nothing is written', async (t) => {
  const dir = tempDir(t);
  const id = await volumeIdentity(dir, { name: 'a', uuid: '6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b', serial: 'S1' });
  t.deepEqual(id, { uuid: '6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b', serial: 'S1' });
  t.throws(() => readFileSync(identityFile(dir, 'a')), { code: 'ENOENT' });
});

test('a generated uuid is kept in the state directory and stays the same', async (t) => {
  const dir = tempDir(t);
  const first = await volumeIdentity(dir, { name: 'vol' });
  t.regex(first.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.is(first.serial, first.uuid.replace(/-/g, '').slice(0, 16));
  t.is(readFileSync(identityFile(dir, 'vol'), 'utf8'), `${first.uuid}\n`);
  t.deepEqual(await volumeIdentity(dir, { name: 'vol' }), first);
  const other = await volumeIdentity(dir, { name: 'other' });
  t.not(other.uuid, first.uuid);
});

test('a damaged identity file is an error, not a silent new identity', async (t) => {
  const dir = tempDir(t);
  await volumeIdentity(dir, { name: 'vol' });
  writeFileSync(identityFile(dir, 'vol'), 'garbage\n');
  await t.throwsAsync(volumeIdentity(dir, { name: 'vol' }), {
    message: `${identityFile(dir, 'vol')} does not hold a UUID; remove it to generate a new identity`,
  });
});
