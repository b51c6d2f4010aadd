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
  /**
   * clone_of (docs/operations.md "Snapshots and clones"): as written, and the
   * parent it names, an image of this pool and namespace and its snapshot
   * (`POOL/IMAGE@SNAP` resolved here, `VOLUME@SNAP` by config/resolve.ts). The
   * first open that finds no image makes it a clone of that snapshot; once
   * the image exists, it has no further effect.
   */
  readonly cloneOf?: string;
  readonly cloneParent?: { readonly image: string; readonly snapshot: string };
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
    const cloneOf = input.get('clone_of');
    let cloneParent: RbdBacking['cloneParent'];
    if (typeof cloneOf === 'string' && typeof r.pool === 'string' && typeof r.image === 'string') {
      const ns = typeof r.namespace === 'string' ? r.namespace : '';
      const at = cloneOf.lastIndexOf('@');
      const parts = cloneOf.slice(0, at).split('/');
      if (typeof r.snapshot === 'string') {
        input.error('clone_of', 'a volume that serves a snapshot (rbd.snapshot) is no clone: give one or the other');
        ok = false;
      } else if (parts.length > 1) {
        // POOL/IMAGE@SNAP, POOL/NAMESPACE/IMAGE@SNAP: librbd clones into the parent's pool here (native/src/rbd/rbd-snap.cc).
        const [pool, parentNs, image] = parts.length === 3 ? parts : [parts[0], '', parts[1]];
        if (pool !== r.pool || parentNs !== ns) {
          input.error('clone_of', `${cloneOf}: a clone is made in its parent's pool${parentNs !== '' ? ' and namespace' : ''}, and this volume's image is ${r.pool}/${ns !== '' ? `${ns}/` : ''}${r.image}`);
          ok = false;
        } else if (image === r.image) {
          input.error('clone_of', `${cloneOf}: names this volume's own image`);
          ok = false;
        } else {
          cloneParent = { image: image!, snapshot: cloneOf.slice(at + 1) };
        }
      }
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
      ...(typeof cloneOf === 'string' ? { cloneOf } : {}),
      ...(cloneParent !== undefined ? { cloneParent } : {}),
    };
  },
  claim: (b) => `rbd image ${b.pool}/${b.namespace !== undefined ? `${b.namespace}/` : ''}${b.image}${b.snapshot !== undefined ? `@${b.snapshot}` : ''} (of ${b.conf ?? 'the default ceph.conf'})`,
  where: (b) => `rbd ${b.pool}/${b.namespace !== undefined ? `${b.namespace}/` : ''}${b.image}${b.snapshot !== undefined ? `@${b.snapshot}` : ''}`,
  configuredSize: () => undefined,
  defaultDirect: () => false,
  async open(b, o) {
    // Loaded on demand: it needs rblk_rbd.node, which a host without librbd lacks.
    const { RbdBackend } = await import('./rbd-backend.js');
    const options = {
      pool: b.pool,
      image: b.image,
      ...(b.namespace !== undefined ? { namespace: b.namespace } : {}),
      ...(b.snapshot !== undefined ? { snapshot: b.snapshot } : {}),
      ...(b.conf !== undefined ? { conf: b.conf } : {}),
      ...(b.clientId !== undefined ? { clientId: b.clientId } : {}),
      ...(b.keyring !== undefined ? { keyring: b.keyring } : {}),
      timeoutSeconds: b.timeoutSeconds,
      readOnly: o.readOnly,
    };
    return b.cloneParent !== undefined ? RbdBackend.openClone(options, b.cloneParent, b.fastPath) : RbdBackend.open(options, b.fastPath);
  },
};
