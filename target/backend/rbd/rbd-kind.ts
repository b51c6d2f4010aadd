// `rbd:`: a volume on a Ceph RBD image (docs/backends.md "rbd"). Its size is
// the image's, so `size` is refused; the files it names (ceph.conf, keyring)
// are checked when the config is loaded, the cluster only when the volume opens.

import { accessSync, constants, statSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { switchOn, SWITCH_SCHEMA, type BackendKind } from '../kind.js';

export interface RbdBacking {
  readonly kind: 'rbd';
  readonly pool: string;
  readonly image: string;
  readonly namespace?: string;
  /** A snapshot of the image, served read-only (docs/operations.md "Snapshots and clones"). */
  readonly snapshot?: string;
  /** ceph.conf; absent: librados's default search (/etc/ceph/ceph.conf, $CEPH_CONF). */
  readonly conf?: string;
  /** The cephx user without `client.`; absent: admin. */
  readonly clientId?: string;
  readonly keyring?: string;
  /** Seconds a cluster operation may take before it fails (connect, monitor and OSD operations). */
  readonly timeoutSeconds: number;
  /** READ and WRITE on the target's native fast path (docs/target.md "Fast path"); default true. */
  readonly fastPath: boolean;
}

export const RBD_DEFAULT_TIMEOUT_SECONDS = 30;

// Ceph's own rules: pool and image names may not contain '/' or '@'.
const name = { type: 'string', pattern: '^[^/@\\s]{1,255}$', patternMessage: 'must be 1 to 255 characters without / @ or spaces' };

export const rbdKind: BackendKind<RbdBacking> = {
  kind: 'rbd',
  key: 'rbd',
  keyText: 'rbd',
  describes: 'a Ceph RBD image',
  selected: (v) => typeof v === 'object' && v !== null,
  properties: {
    rbd: {
      type: 'object',
      additionalProperties: false,
      required: ['pool', 'image'],
      properties: {
        pool: name,
        image: name,
        namespace: name,
        snapshot: name,
        conf: { type: 'string', minLength: 1 },
        client_id: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', patternMessage: 'must be a cephx user name without client., such as rblk' },
        keyring: { type: 'string', minLength: 1 },
        timeout_s: { type: 'integer', minimum: 1, maximum: 600 },
        fast_path: SWITCH_SCHEMA,
      },
    },
  },
  descriptorOptions: false,
  resolve(input) {
    const r = input.get('rbd') as Record<string, unknown>;
    let ok = true;
    if (input.sizeGiven) {
      input.error('size', "an rbd volume's size is its image's: grow the image with `rbd resize`, and rblkd follows");
      ok = false;
    }
    const file = (key: 'conf' | 'keyring'): string | undefined => {
      const v = r[key];
      if (typeof v !== 'string') return undefined;
      const path = resolvePath(input.configDir, v);
      try {
        if (!statSync(path).isFile()) throw Object.assign(new Error(), { code: 'EISDIR' });
        accessSync(path, constants.R_OK);
      } catch (e) {
        const code = (e as { code?: string }).code;
        const why = code === 'ENOENT' ? 'does not exist' : code === 'EISDIR' ? 'is not a regular file' : 'cannot be read';
        input.error(['rbd', key], `${path} ${why}`);
        ok = false;
      }
      return path;
    };
    if (typeof r.snapshot === 'string' && !input.readOnly) {
      input.error(['rbd', 'snapshot'], 'a snapshot is served read-only: give read_only: true (for a writable copy, `rblkd ctl clone`)');
      ok = false;
    }
    const conf = file('conf');
    const keyring = file('keyring');
    if (!ok || typeof r.pool !== 'string' || typeof r.image !== 'string') return undefined;
    return {
      kind: 'rbd',
      pool: r.pool,
      image: r.image,
      ...(typeof r.namespace === 'string' ? { namespace: r.namespace } : {}),
      ...(typeof r.snapshot === 'string' ? { snapshot: r.snapshot } : {}),
      ...(conf !== undefined ? { conf } : {}),
      ...(typeof r.client_id === 'string' ? { clientId: r.client_id } : {}),
      ...(keyring !== undefined ? { keyring } : {}),
      timeoutSeconds: typeof r.timeout_s === 'number' ? r.timeout_s : RBD_DEFAULT_TIMEOUT_SECONDS,
      fastPath: switchOn(r.fast_path, true),
    };
  },
  claim: (b) => `rbd image ${b.pool}/${b.namespace !== undefined ? `${b.namespace}/` : ''}${b.image}${b.snapshot !== undefined ? `@${b.snapshot}` : ''} (of ${b.conf ?? 'the default ceph.conf'})`,
  where: (b) => `rbd ${b.pool}/${b.namespace !== undefined ? `${b.namespace}/` : ''}${b.image}${b.snapshot !== undefined ? `@${b.snapshot}` : ''}`,
  configuredSize: () => undefined,
  defaultDirect: () => false,
  async open(b, o) {
    // Loaded on demand: it needs rblk_rbd.node, which a host without librbd lacks.
    const { RbdBackend } = await import('./rbd-backend.js');
    return RbdBackend.open({
      pool: b.pool,
      image: b.image,
      ...(b.namespace !== undefined ? { namespace: b.namespace } : {}),
      ...(b.snapshot !== undefined ? { snapshot: b.snapshot } : {}),
      ...(b.conf !== undefined ? { conf: b.conf } : {}),
      ...(b.clientId !== undefined ? { clientId: b.clientId } : {}),
      ...(b.keyring !== undefined ? { keyring: b.keyring } : {}),
      timeoutSeconds: b.timeoutSeconds,
      readOnly: o.readOnly,
    }, b.fastPath);
  },
};
