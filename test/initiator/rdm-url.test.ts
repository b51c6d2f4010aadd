// A same-host initiator reaches an shm listener with the URL it would use over
// tcp plus provider=shm (docs/transport.md "RDM endpoints"), and tcp;ofi_rxm the
// same way: the listener's address and port name it on either.
import test from 'ava';
import { connect } from '../../initiator/index.js';
import { availableRdmProviders } from '../../native/fabric.js';
import { INITIATOR, pattern, startServer, TARGET_NAME } from './helpers/target.js';
import { RDM_PROVIDERS } from '../helpers/fabric-pair.js';

const offered = availableRdmProviders();

for (const provider of RDM_PROVIDERS) {
  const title = `${provider}: rblk://127.0.0.1:PORT/vol0?provider=${provider} opens the volume, and what is written reads back`;
  if (!offered.includes(provider)) {
    test.serial.skip(`${title} (skipped: libfabric offers no ${provider} here)`, () => undefined);
    continue;
  }
  test.serial(title, async (t) => {
    const target = await startServer(provider, [{ name: 'vol0', lun: 0, size: 4 << 20 }]);
    const url = `rblk://127.0.0.1:${target.port}/vol0?provider=${encodeURIComponent(provider)}&initiator=${INITIATOR}&target=${TARGET_NAME}`;
    const s = await connect(url);
    t.teardown(async () => {
      await s.close();
      await target.close();
    });
    const v = await s.open();
    const data = pattern(256 << 10, 29);
    await v.write(64 << 10, data);
    t.true((await v.read(64 << 10, data.length)).equals(data));
  });
}
