// Busy polling on both ends (docs/architecture.md "Busy polling"): rblkd's
// busy_poll_us (TargetServerOptions.busyPollMicros) reaches each accepted
// fabric connection's endpoint, the library's busyPollMicros its own; with
// both on, data written is read back intact, each side spins while commands
// are outstanding, and an idle session neither wakes nor spins. A session
// without the option never spins. Over tcp the spin is the prepare hook's
// (an endpoint with a wait fd); over shm, which has none, it is the poll
// passes kept back to back for the budget (rdm.cc OnPollTimer); tcp;ofi_rxm
// has a wait fd, as tcp.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { connect } from '../../initiator/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { availableRdmProviders, type Endpoint } from '../../native/fabric.js';
import { RDM_PROVIDERS } from '../helpers/fabric-pair.js';
import { exportMemoryVolume, listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const BS = 4096;
const BLOCKS = 256;

const PROVIDERS = ['tcp', ...RDM_PROVIDERS] as const;
const here = new Set(['tcp', ...availableRdmProviders()]);

for (const provider of PROVIDERS) {
(here.has(provider) ? test.serial : test.serial.skip)(`${provider}: busy polling on both ends moves the same bytes, spins while busy and goes quiet when idle`, async (t) => {
  const server = new TargetServer({ ...testServerOptions(memoryLog()), busyPollMicros: 100 }, rblkConnections);
  server.addVolume(exportMemoryVolume({ name: 'vol', lun: 0, size: BLOCKS * BS }));
  t.teardown(() => server.close());
  const { port } = await listenTest(server, provider);
  const opts = { address: '127.0.0.1', port, provider, volume: 'vol', targetName: TARGET_NAME, initiatorName: 'iqn.2026-12.io.rblk:spin' };
  const spinning = await connect({ ...opts, busyPollMicros: 100 });
  t.teardown(() => spinning.close());
  const plain = await connect({ ...opts, initiatorName: 'iqn.2026-12.io.rblk:plain' });
  t.teardown(() => plain.close());
  const vol = await spinning.open('vol');
  const data = randomBytes(BLOCKS * BS);
  // Four at a time, so that commands are outstanding when the loop would sleep.
  for (let i = 0; i < BLOCKS; i += 4) await Promise.all([0, 1, 2, 3].map((k) => vol.write((i + k) * BS, data.subarray((i + k) * BS, (i + k + 1) * BS))));
  const back = Buffer.alloc(data.length);
  for (let i = 0; i < BLOCKS; i += 4) await Promise.all([0, 1, 2, 3].map(async (k) => (await vol.read((i + k) * BS, BS)).copy(back, (i + k) * BS)));
  t.true(back.equals(data), 'the bytes read back are those written');
  const other = await plain.open('vol');
  for (let i = 0; i < 64; i++) t.true((await other.read(i * BS, BS)).equals(data.subarray(i * BS, (i + 1) * BS)));

  const eps = [...server.sessions].map((s) => ((s as RblkConnection).conn as unknown as { ep: Endpoint }).ep);
  t.is(eps.length, 2);
  for (const ep of eps) t.is(ep.busyPollMicros, 100, 'the accepted endpoint got busy_poll_us');
  const [client] = spinning.endpointWakeups;
  const [quiet] = plain.endpointWakeups;
  t.true(client.spins > 0, `the library spun while busy: ${JSON.stringify(client)}`);
  t.is(quiet.spins, 0, `a session without busyPollMicros never spins: ${JSON.stringify(quiet)}`);
  t.true(eps.every((ep) => ep.wakeups.spins > 0), `rblkd's endpoints spun while busy: ${JSON.stringify(eps.map((ep) => ep.wakeups))}`);

  // Idle: nothing outstanding, so no spin and no wake-up on either side (counted, not timed).
  await new Promise((r) => setTimeout(r, 50));
  const before = [spinning.endpointWakeups[0], ...eps.map((ep) => ep.wakeups)];
  await new Promise((r) => setTimeout(r, 300));
  t.deepEqual([spinning.endpointWakeups[0], ...eps.map((ep) => ep.wakeups)], before, 'no wake-up or spin while idle');
  vol.close();
  other.close();
});
}

test('busyPollMicros outside 0..10000 is refused before connecting', async (t) => {
  for (const us of [-1, 10_001, 2.5]) {
    await t.throwsAsync(connect({ address: '127.0.0.1', port: 1, busyPollMicros: us }), { instanceOf: RangeError, message: /busyPollMicros/ });
  }
});
