// CHAP and mutual CHAP on the iSCSI login (RFC 7143 §12.1.3) from the
// secrets rblk logins use (auth.initiators), with libiscsi's own client
// (docs/iscsi.md "Authentication").
import test from 'ava';
import { INITIATOR, IQN, run, startIscsi, type IscsiFixture } from './portal-fixture.js';

const SECRET = 'secret-for-the-initiator-1';
let f: IscsiFixture;

test.before(async () => {
  f = await startIscsi([{ name: 'vol0', lun: 0, size: 1 << 20 }], { secrets: { [INITIATOR]: SECRET }, authRequired: true });
});
test.after.always(async () => {
  await f?.close();
});

const url = (creds: string, args = ''): string => `iscsi://${creds}127.0.0.1:${f.port}/${IQN}/0${args}`;
const inq = (u: string) => run('iscsi-inq', ['-i', INITIATOR, u]);

test.serial('CHAP with the configured secret logs in', async (t) => {
  const r = await inq(url(`host-a%${SECRET}@`));
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /Vendor:RBLK/);
  t.true(f.log.some((l) => /CHAP authentication accepted/.test(l.message)));
});

test.serial('a wrong secret, or none, is refused with 0x0201 (authentication failure)', async (t) => {
  const before = f.log.filter((l) => /status 0x0201/.test(l.message)).length;
  const wrong = await inq(url('host-a%not-the-secret-at-all@'));
  t.not(wrong.code, 0);
  const none = await inq(url(''));
  t.not(none.code, 0);
  t.is(f.log.filter((l) => /status 0x0201/.test(l.message)).length, before + 2);
});

test.serial('a name with no secret is refused like a wrong secret', async (t) => {
  const r = await run('iscsi-inq', ['-i', 'iqn.2026-12.io.rblk:stranger', url(`x%${SECRET}@`)]);
  t.not(r.code, 0);
  t.true(f.log.some((l) => /status 0x0201.*no secret is configured/.test(l.message)));
});

test.serial('mutual CHAP: the target proves the same secret under its target name', async (t) => {
  const ok = await inq(url(`host-a%${SECRET}@`, `?target_user=${IQN}&target_password=${SECRET}`));
  t.is(ok.code, 0, ok.stderr);
  t.true(f.log.some((l) => /CHAP authentication accepted \(mutual\)/.test(l.message)));
  // The initiator refuses a target that does not know the secret it expects.
  const bad = await inq(url(`host-a%${SECRET}@`, `?target_user=${IQN}&target_password=another-secret-entirely`));
  t.not(bad.code, 0);
});
