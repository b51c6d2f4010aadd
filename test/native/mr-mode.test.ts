// The verbs provider's memory-registration rules (virtual addresses, keys the
// provider chooses) on the providers this machine has: tcp and sockets grant
// them as FI_MR_BASIC when asked (docs/transport.md "Memory-registration modes").
import test from 'ava';
import { addon } from '../../native/binding.js';
import { Domain, FabricError, mrModeFromEnv } from '../../native/fabric.js';
import { connectPair, pattern, PROVIDERS } from '../helpers/fabric-pair.js';

const C = addon().constants;

for (const provider of PROVIDERS) {
  test.serial(`${provider} basic: the domain reports virtual addresses, allocated memory and provider keys`, async (t) => {
    const d = Domain.open({ provider, address: '127.0.0.1', mrMode: 'basic' });
    t.teardown(() => d.close());
    t.is(d.info.mrMode & (C.FI_MR_VIRT_ADDR | C.FI_MR_ALLOCATED | C.FI_MR_PROV_KEY), C.FI_MR_VIRT_ADDR | C.FI_MR_ALLOCATED | C.FI_MR_PROV_KEY);
    t.is(d.info.apiVersion, '1.4');
    const a = d.register(3 * 4096, { remote: true });
    const b = d.register(4096, { remote: true });
    // The remote address of byte 0 is where the pages are mapped: non-zero, page-aligned, one per region.
    t.not(a.remoteBase, 0n);
    t.is(a.remoteBase % 4096n, 0n);
    t.not(a.remoteBase, b.remoteBase);
    t.deepEqual(a.remote(100, 8), { address: a.remoteBase + 100n, key: a.key, length: 8 });
    t.not(a.key, b.key);
  });

  test.serial(`${provider} basic: keys are the provider's, not the ones rblk asks for`, async (t) => {
    const basic = Domain.open({ provider, address: '127.0.0.1', mrMode: 'basic' });
    const plain = Domain.open({ provider, address: '127.0.0.1', mrMode: 'default' });
    t.teardown(async () => {
      await basic.close();
      await plain.close();
    });
    // The same first registration on each: the default mode keeps the key rblk
    // requested; under FI_MR_PROV_KEY the provider picks its own. Were they
    // equal, code that used the requested key would pass this mode unnoticed.
    const requested = plain.register(4096, { remote: true }).key;
    const chosen = basic.register(4096, { remote: true }).key;
    t.not(chosen, requested);
  });

  test.serial(`${provider} default: the domain needs none of the verbs bits here`, async (t) => {
    const d = Domain.open({ provider, address: '127.0.0.1', mrMode: 'default' });
    t.teardown(() => d.close());
    t.is(d.info.apiVersion, '1.17');
    t.is(d.info.mrMode & (C.FI_MR_VIRT_ADDR | C.FI_MR_PROV_KEY), 0);
    const r = d.register(4096, { remote: true });
    t.is(r.remoteBase, 0n);
  });

  test.serial(`${provider} basic: RMA write and read at an offset by virtual address, data compared`, async (t) => {
    const pair = await connectPair(provider, { mrMode: 'basic' });
    t.teardown(() => pair.close());
    const remote = pair.client.register(1 << 20, { remote: true });
    const local = pair.server.register(1 << 20);
    const data = pattern(65_537, 9);
    data.copy(local.buffer, 4096);
    await pair.serverEp.write(local.slice(4096, data.length), remote.remote(12_345, data.length), { deliveryComplete: true });
    t.true(remote.buffer.subarray(12_345, 12_345 + data.length).equals(data), 'write landed at the offset');
    t.is(remote.buffer[12_344], 0, 'the byte before is untouched');
    local.buffer.fill(0);
    await pair.serverEp.read(local.slice(0, data.length), remote.remote(12_345, data.length));
    t.true(local.buffer.subarray(0, data.length).equals(data), 'read came back');
  });

  test.serial(`${provider} basic: an offset used as the remote address (the default rule) is refused`, async (t) => {
    const pair = await connectPair(provider, { mrMode: 'basic' });
    t.teardown(() => pair.close());
    const remote = pair.client.register(64 * 1024, { remote: true });
    const local = pair.server.register(4096);
    remote.buffer.write('intact', 0);
    // Proves the provider really checks virtual addresses: offset 0 lies in no region.
    const err = await t.throwsAsync(pair.serverEp.read(local.slice(0, 16), { address: 0n, key: remote.key, length: 16 }), { instanceOf: FabricError });
    t.truthy(err?.code);
    t.is(remote.buffer.subarray(0, 6).toString(), 'intact');
  });
}

test('an unknown mrMode is refused with a clear error', (t) => {
  const err = t.throws(() => Domain.open({ provider: 'tcp', address: '127.0.0.1', mrMode: 'bogus' as 'basic' }));
  t.is((err as { code?: string } | undefined)?.code, 'ERR_INVALID_ARG_VALUE');
  t.regex(err?.message ?? '', /mrMode must be 'default' or 'basic'/);
});

test('RBLK_FI_MR_MODE chooses the default mode and an unknown value is an error', (t) => {
  t.is(mrModeFromEnv({}), 'default');
  t.is(mrModeFromEnv({ RBLK_FI_MR_MODE: 'basic' }), 'basic');
  t.is(mrModeFromEnv({ RBLK_FI_MR_MODE: 'default' }), 'default');
  t.throws(() => mrModeFromEnv({ RBLK_FI_MR_MODE: 'verbs' }), { instanceOf: RangeError, message: /RBLK_FI_MR_MODE=verbs/ });
});
