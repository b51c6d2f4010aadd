// Listening for NBD clients on a unix socket or 127.0.0.1. A socket file left
// by an attach that was killed is removed (nobody answers on it); one that a
// live process answers on is refused.
import { lstat, mkdir, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import type { NbdAddress, NbdServer } from '../nbd/index.js';
import { portOwner } from './port-owner.js';

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export async function listenNbd(server: NbdServer, where: { path: string } | { port: number }): Promise<NbdAddress> {
  if ('port' in where) {
    try {
      return await server.listen({ host: '127.0.0.1', port: where.port });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      const owner = await portOwner(where.port);
      const who = owner === undefined ? 'another program' : `${owner.command} (pid ${owner.pid})`;
      throw new Error(`cannot serve NBD on 127.0.0.1:${where.port}: the port is in use by ${who} (EADDRINUSE); pick another --nbd-port, or 0 for a free one`, { cause: e });
    }
  }
  await mkdir(dirname(where.path), { recursive: true, mode: 0o755 });
  try {
    return await server.listen({ path: where.path });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    // Only a socket is ours to replace: a mistyped path must not delete someone's file.
    if (!(await lstat(where.path)).isSocket()) throw new Error(`${where.path} exists and is not a socket`);
    if (await answers(where.path)) throw new Error(`${where.path} is in use: another process serves NBD on it (pass --nbd-socket PATH for another)`);
    await rm(where.path, { force: true });
    return server.listen({ path: where.path });
  }
}

/** The NBD URI (NetworkBlockDevice/nbd doc/uri.md) that nbdinfo, nbdcopy and qemu take. */
export function nbdUri(where: NbdAddress, exportName: string): string {
  const name = encodeURIComponent(exportName);
  return where.path !== undefined ? `nbd+unix:///${name}?socket=${where.path}` : `nbd://127.0.0.1:${where.port}/${name}`;
}
