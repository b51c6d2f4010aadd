// A start refused for a reason in the configuration exits 78 (EX_CONFIG), which the unit's
// RestartPreventExitStatus=78 does not restart into, and says which volume and path; what the
// check can know it reports first (docs/operations.md "Checking a file", "Exit statuses").
import test from 'ava';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../config/loader.js';
import { ConfigRefusal } from '../../target/daemon/config-refusal.js';
import { createDaemonLogger } from '../../target/daemon/logger.js';
import { ServedVolume } from '../../target/daemon/volumes.js';
import { baseConfig, runDaemon, workdir } from './helpers/daemon-process.js';

test.serial('a read-only volume whose file does not exist: the check says so, and the start exits 78 naming it', async (t) => {
  const w = workdir(t);
  const path = join(w.dir, 'golden.img');
  w.writeConfig(baseConfig(w, [{ name: 'golden', path, size: '1MiB', read_only: true }]));
  const check = await runDaemon(t, ['--check-config', w.configPath]);
  t.is(check.code, 78, check.stdout);
  t.true(check.stderr.includes(`volumes[0].path: ${path} does not exist, and a read_only volume is never created`), check.stderr);
  const start = await runDaemon(t, ['--config', w.configPath]);
  t.is(start.code, 78, start.stderr);
  t.true(start.stderr.includes(`volumes[0].path: ${path} does not exist, and a read_only volume is never created`), start.stderr);
  t.notRegex(start.stderr, /rblkd ready/);
});

test.serial('a volume file gone between the check and the open refuses the start as a configuration error naming the volume and path', async (t) => {
  const w = workdir(t);
  const path = join(w.dir, 'golden.img');
  writeFileSync(path, Buffer.alloc(1 << 20));
  const config = parseConfig(
    JSON.stringify(baseConfig(w, [{ name: 'golden', path, read_only: true }])),
    w.configPath,
  );
  rmSync(path);
  const log = createDaemonLogger({ level: 'error', format: 'text' });
  const e = await t.throwsAsync(ServedVolume.open(config.volumes[0]!, { stateDir: w.state, maxIo: 1 << 20, log }));
  t.true(e instanceof ConfigRefusal, String(e));
  t.is((e as ConfigRefusal).code, 'ENOENT');
  // The wording the config check uses for the same missing file (config/backing.ts readOnlyMissing), not a raw ENOENT.
  t.is(e!.message, `volume golden: ${path} does not exist, and a read_only volume is never created (create it, or drop read_only)`);
});
