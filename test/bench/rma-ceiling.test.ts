// The C transport ceiling (bench/ceiling/rma-ceiling), run briefly over each
// software provider: it must exit 0, print one JSON line with real work in
// it, and, with --verify, read back through the fabric what it wrote. No
// assertion on speed: the figures belong to docs/performance.md.
import test, { type ExecutionContext } from 'ava';
import { existsSync } from 'node:fs';
import { availableRdmProviders } from '../../native/fabric.js';
import { parseRmaCeiling, RMA_CEILING_BINARY, runRmaCeiling, type RmaCeilingResult } from '../../bench/peers/rma-ceiling.js';

const TIMEOUT_MS = 30_000;

async function ceiling(t: ExecutionContext, args: string[]): Promise<RmaCeilingResult> {
  t.true(existsSync(RMA_CEILING_BINARY), `${RMA_CEILING_BINARY} is missing: run scripts/setup.sh`);
  const run = await runRmaCeiling(args, TIMEOUT_MS);
  t.is(run.code, 0, run.stderr);
  t.is(run.stdout.trim().split('\n').length, 1, 'one line of output');
  return parseRmaCeiling(run.stdout);
}

function sane(t: ExecutionContext, r: RmaCeilingResult): void {
  t.true(r.ops > 0, `ops: ${r.ops}`);
  t.true(r.opsPerSec > 0 && r.mbps > 0);
  t.true(r.seconds > 0);
  const l = r.latencyUs;
  t.true(l.p50 > 0 && l.p50 <= l.p90 && l.p90 <= l.p99, `ordered percentiles: ${JSON.stringify(l)}`);
  t.true(l.mean > 0 && l.max > 0);
  // Both processes did work in the window: the loop posts, the peer's provider answers.
  t.true(r.active.userUs + r.active.sysUs > 0, 'the active side used CPU');
  t.true(r.passive.userUs + r.passive.sysUs > 0, 'the passive side used CPU');
}

for (const provider of ['tcp', 'sockets']) {
  test(`${provider}: a write loop at QD4 after a write-then-read verify`, async (t) => {
    const r = await ceiling(t, ['--provider', provider, '--op', 'write', '--qd', '4', '--size', '4096', '--seconds', '0.3', '--verify']);
    t.like(r, { provider, op: 'write', qd: 4, size: 4096, waits: 'fd' });
    sane(t, r);
    t.truthy(r.verified, 'verify ran');
    t.true((r.verified?.blocks ?? 0) >= 4, 'every slot was checked');
    t.is(r.verified?.bytes, (r.verified?.blocks ?? 0) * 4096);
  });

  test(`${provider}: a read loop at QD1, 64 KiB, sequential offsets, verified`, async (t) => {
    const r = await ceiling(t, ['--provider', provider, '--op', 'read', '--qd', '1', '--size', '64K', '--pattern', 'seq', '--seconds', '0.3', '--verify']);
    t.like(r, { provider, op: 'read', qd: 1, size: 65536, pattern: 'seq' });
    sane(t, r);
    t.true((r.verified?.blocks ?? 0) > 0);
  });

  // FI_MR_BASIC (API 1.4) gives virtual addresses and provider-chosen keys, as
  // verbs does: the verify passes only if both reach the peer intact.
  test(`${provider}: --mr-basic honours FI_MR_VIRT_ADDR and FI_MR_PROV_KEY`, async (t) => {
    const r = await ceiling(t, ['--provider', provider, '--mr-basic', '--qd', '2', '--seconds', '0.2', '--verify']);
    t.true(r.mrMode.includes('FI_MR_VIRT_ADDR') && r.mrMode.includes('FI_MR_PROV_KEY'), `mrMode: ${r.mrMode.join(',')}`);
    sane(t, r);
    t.true((r.verified?.blocks ?? 0) > 0);
  });
}

test('tcp: --delivery-complete writes (fi_writemsg, FI_DELIVERY_COMPLETE), verified', async (t) => {
  const r = await ceiling(t, ['--op', 'write', '--delivery-complete', '--qd', '2', '--seconds', '0.2', '--verify']);
  t.like(r, { op: 'write', completion: 'delivery' });
  sane(t, r);
  t.true((r.verified?.blocks ?? 0) > 0);
});

test('tcp: the default mr_mode here is empty (offsets and requested keys)', async (t) => {
  const r = await ceiling(t, ['--qd', '1', '--seconds', '0.2']);
  t.deepEqual(r.mrMode, []);
  t.is(r.completion, 'default');
  t.is(r.verified, undefined, 'no verify unless asked');
});

test('a provider that does not exist: fi_getinfo is named with its fi_strerror, exit 1', async (t) => {
  const run = await runRmaCeiling(['--provider', 'no-such-provider', '--seconds', '0.1'], TIMEOUT_MS);
  t.is(run.code, 1);
  t.is(run.stdout, '');
  t.regex(run.stderr, /rma-ceiling: fi_getinfo: No data available \(-61\)/);
});

test('a bad flag: usage on stderr, exit 2', async (t) => {
  const run = await runRmaCeiling(['--qd', '0'], TIMEOUT_MS);
  t.is(run.code, 2);
  t.regex(run.stderr, /--qd 0: expected 1 to 4096/);
});

// The RDM mode (FI_EP_RDM, docs/transport.md "RDM endpoints"): the peer's name
// comes over the pipe into an address vector. shm's CQ has no wait fd, so its
// row says busy-poll; rxm's has one.
for (const [provider, waits] of [
  ['shm', 'busy-poll'],
  ['tcp;ofi_rxm', 'fd'],
] as const) {
  const title = `${provider} (RDM): read and delivery-complete write loops at QD4, verified`;
  if (!availableRdmProviders().includes(provider)) {
    test.skip(`${title} (skipped: libfabric offers no ${provider} here)`, () => undefined);
    continue;
  }
  test(title, async (t) => {
    const r = await ceiling(t, ['--provider', provider, '--op', 'read', '--qd', '4', '--size', '4096', '--seconds', '0.3', '--verify']);
    t.like(r, { provider, op: 'read', qd: 4, waits });
    sane(t, r);
    t.true((r.verified?.blocks ?? 0) >= 4, 'every slot was checked');
    const w = await ceiling(t, ['--provider', provider, '--op', 'write', '--delivery-complete', '--qd', '4', '--seconds', '0.3', '--verify']);
    t.like(w, { provider, op: 'write', completion: 'delivery', waits });
    sane(t, w);
    t.true((w.verified?.blocks ?? 0) >= 4);
  });
}
