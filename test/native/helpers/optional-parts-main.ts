// Run as a child of optional-parts.test.ts with RBLK_NATIVE pointing at a
// directory that holds rblk_native.node alone, which is byte for byte what a
// build with RBLK_WITH_URING, RBLK_WITH_FUSE and RBLK_WITH_SYSTEMD OFF makes.
// Prints, as JSON, what each feature did.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addon, fuseAddon, nativeFeatures, rbdAddon, systemdAddon, uringAddon } from '../../../native/binding.js';
import { FuseMount } from '../../../native/fuse.js';
import { PositionalIo } from '../../../target/backend/positional-io.js';
import { createDaemonLogger } from '../../../target/daemon/logger.js';
import { systemdNotifier } from '../../../target/daemon/notify.js';

interface Failure {
  name: string;
  code: unknown;
  errno: unknown;
  op: unknown;
  package: unknown;
  message: string;
}

function failure(e: unknown): Failure | string {
  if (!(e instanceof Error)) return String(e);
  const f = e as Error & { code?: unknown; errno?: unknown; op?: unknown; package?: unknown };
  return { name: f.name, code: f.code, errno: f.errno, op: f.op, package: f.package, message: f.message };
}

function attempt(fn: () => unknown): Failure | string {
  try {
    fn();
    return 'loaded';
  } catch (e) {
    return failure(e);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'rblk-optional-'));
let mount: Failure | string;
try {
  const m = await FuseMount.mount(dir, { fileName: 'v', size: 4096, blockSize: 512, readOnly: true }, {
    read: () => Promise.resolve(Buffer.alloc(0)),
    write: () => Promise.resolve(0),
    fsync: () => Promise.resolve(),
    fallocate: () => Promise.resolve(),
  });
  await m.close();
  mount = 'mounted';
} catch (e) {
  mount = failure(e);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const log = createDaemonLogger({ level: 'error', format: 'text' });
console.log(
  JSON.stringify({
    io_uring: attempt(uringAddon),
    fuse: attempt(fuseAddon),
    sd_notify: attempt(systemdAddon),
    rbd: attempt(rbdAddon),
    features: nativeFeatures(),
    providers: addon().providers(),
    engine: PositionalIo.engine('auto', 'vol').fallbackReason,
    explicitEngine: attempt(() => PositionalIo.engine('io_uring', 'vol')),
    mount,
    notified: systemdNotifier(log).send({ READY: 1 }),
  }),
);
