// TSK_MGMT FENCE GATEWAY from the wire (docs/protocol.md §14.1): whom a gateway
// agrees to fence, that the answer waits for the store's fence, and that a
// version-3 connection may not ask. The store here is a memory volume that can
// fence (its fenceGateway is held by the test); the real thing, an RBD image
// and the Ceph blocklist, is test/daemon/rbd-gateway-fence.test.ts.
import test from 'ava';
import { randomUUID } from 'node:crypto';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { PROTOCOL_VERSION, TaskFunction, TaskResponse } from '../../protocol/wire/index.js';
import type { GatewayFenceResult } from '../../target/backend/backend.js';
import { MemoryBackend } from '../../target/backend/memory.js';
import { LogicalUnit } from '../../target/scsi/logical-unit.js';
import { TargetPortGroups } from '../../target/scsi/port-groups.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { startTarget, type Fixture } from '../helpers/target-fixture.js';
import { until as waitFor } from '../../bench/kit/wait.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

/** A store shared with a peer gateway: each fence waits until the test answers it. */
class FencingMemory extends MemoryBackend {
  readonly asked: number[] = [];
  readonly #answers: ((r: GatewayFenceResult | Error) => void)[] = [];

  fenceGateway(group: number): Promise<GatewayFenceResult> {
    this.asked.push(group);
    return new Promise((resolve, reject) => this.#answers.push((r) => (r instanceof Error ? reject(r) : resolve(r))));
  }

  answer(r: GatewayFenceResult | Error): void {
    const a = this.#answers.shift();
    if (a === undefined) throw new Error('no fence is waiting');
    a(r);
  }

  get waiting(): number {
    return this.#answers.length;
  }
}

const groups = (): TargetPortGroups =>
  new TargetPortGroups({ local: { group: 2, state: 'active-optimized', relativePort: 2 }, peers: [{ group: 1, state: 'active-non-optimized', relativePort: 1 }] });

async function start(kind: 'loop' | 'tcp'): Promise<{ f: Fixture; shared: FencingMemory }> {
  const f = await startTarget(kind, []);
  const shared = new FencingMemory({ size: 1 << 20, name: 'shared' });
  const mk = (name: string, lun: number, backend: MemoryBackend, pg?: TargetPortGroups): void => {
    const lu = new LogicalUnit({ name, backend, identifier: randomUUID(), ...(pg ? { portGroups: pg } : {}) });
    f.server.addVolume({ name, lun, lu, access: () => 'rw' });
  };
  mk('shared', 0, shared, groups());
  mk('local', 1, new MemoryBackend({ size: 1 << 20, name: 'local' }), groups());
  mk('lonely', 2, new MemoryBackend({ size: 1 << 20, name: 'lonely' }));
  return { f, shared };
}

for (const kind of ['loop', 'tcp'] as const) {
  test.serial(`${kind}: FENCE GATEWAY of a peer group is answered once the store has fenced it; a failed fence is FAILED`, async (t) => {
    const { f, shared } = await start(kind);
    t.teardown(() => f.close());
    const c = await f.connect();
    t.is(c.version, PROTOCOL_VERSION);
    // The first command of a nexus reports the power-on unit attention (SAM-5 5.14).
    await c.command({ lun: 1, cdb: cdb.testUnitReady() });
    let answered: number | undefined;
    const tm = c.taskManagement(0, TaskFunction.FENCE_GATEWAY, 1n).then((r) => (answered = r));
    await waitFor(() => shared.waiting === 1, 'the store to be asked');
    t.deepEqual(shared.asked, [1]);
    // Commands carry on meanwhile, and the answer waits for the store.
    t.is((await c.command({ lun: 1, cdb: cdb.testUnitReady() })).status, ScsiStatus.GOOD);
    t.is(answered, undefined, 'no answer before the store fenced the gateway');
    shared.answer({ kind: 'fenced', address: '127.0.0.1:0/1234' });
    t.is(await tm, TaskResponse.COMPLETE);
    t.true(f.log.some((l) => l.message === 'FENCE GATEWAY of target port group 1 on LUN 0: the gateway of group 1 (client 127.0.0.1:0/1234) is fenced out of the store'));

    const failed = c.taskManagement(0, TaskFunction.FENCE_GATEWAY, 1n);
    await waitFor(() => shared.waiting === 1, 'the store to be asked again');
    shared.answer(new Error('rados_mon_command osd blocklist add: ETIMEDOUT'));
    t.is(await failed, TaskResponse.FAILED, 'the store could not fence: the initiator must not reissue');
    t.true(f.log.some((l) => /FENCE GATEWAY of target port group 1 on LUN 0: the fence of group 1 failed: rados_mon_command/.test(l.message)));

    const unknown = c.taskManagement(0, TaskFunction.FENCE_GATEWAY, 1n);
    await waitFor(() => shared.waiting === 1, 'the store to be asked a third time');
    shared.answer({ kind: 'unknown' });
    t.is(await unknown, TaskResponse.COMPLETE, 'no gateway of that group ever served the volume: nothing to fence');
    t.deepEqual(shared.asked, [1, 1, 1]);
    t.false(c.isClosed);
  });

  test.serial(`${kind}: FENCE GATEWAY is refused for a group that is no peer, answered at once for the own group and an unshared store, and INCORRECT LUN for an unmapped LUN`, async (t) => {
    const { f, shared } = await start(kind);
    t.teardown(() => f.close());
    const c = await f.connect();
    t.is(await c.taskManagement(0, TaskFunction.FENCE_GATEWAY, 7n), TaskResponse.FAILED, 'group 7 is not in the alua peers');
    t.is(await c.taskManagement(0, TaskFunction.FENCE_GATEWAY, 2n), TaskResponse.COMPLETE, 'its own group: nothing to fence');
    t.is(await c.taskManagement(1, TaskFunction.FENCE_GATEWAY, 1n), TaskResponse.COMPLETE, 'a store no other gateway shares: nothing to fence');
    t.is(await c.taskManagement(2, TaskFunction.FENCE_GATEWAY, 1n), TaskResponse.FAILED, 'a LU without alua knows no peer');
    t.is(await c.taskManagement(9, TaskFunction.FENCE_GATEWAY, 1n), TaskResponse.INCORRECT_LUN);
    t.deepEqual(shared.asked, [], 'the store was never asked');
    t.true(f.log.some((l) => l.message === "FENCE GATEWAY of target port group 7 on LUN 0: group 7 is not a peer group in this gateway's alua section"));

    const old = await f.connect({ protocolVersion: 3 });
    t.is(old.version, 3);
    await t.throwsAsync(old.taskManagement(0, TaskFunction.FENCE_GATEWAY, 1n));
    await waitFor(() => old.isClosed, 'the version-3 connection to be dropped');
    t.true(f.log.some((l) => /FENCE GATEWAY on a version 3 connection/.test(l.message)));
    t.false(c.isClosed, 'and nothing else');
    t.deepEqual(shared.asked, []);
  });
}
