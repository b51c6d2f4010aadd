// The shape of /etc/rblk/rblkd.yaml. The JSON Schema checks types, ranges and unknown keys
// (ajv, allErrors); everything that needs more than one key or the filesystem (sizes, LUN
// clashes, backing paths, secret files) is checked in resolve.ts. The types at the bottom are
// the validated configuration with every default applied, in the names the daemon uses.

import type { SchemaObject } from 'ajv';
import type { ConfigIssue } from './config-error.js';
import type { LunRecordUpdate } from './lun-record.js';
import { MAX_BUSY_POLL_US } from '../native/busy-poll.js';
import { SWITCH_SCHEMA } from '../target/backend/kind.js';
import { kindProperties, type VolumeBacking as RegisteredBacking } from '../target/backend/registry.js';
import { FRONT_END_NAMES, type FrontEndName } from '../target/front-end/registry.js';
import { ALUA_STATES, type AluaState } from '../protocol/scsi/target-port-groups.js';

export { DEFAULT_CONFIG_PATH, DEFAULT_CONTROL_SOCKET, EX_CONFIG } from './paths.js';
export const DEFAULT_STATE_DIR = '/var/lib/rblk';
/** Drop-in volume files, beside the config file unless volumes_dir says otherwise (docs/operations.md "Volumes from rblkd ctl"). */
export const DEFAULT_VOLUMES_DIR = 'volumes.d';
/** Loopback by default: serving the network is a decision the administrator writes down. */
export const DEFAULT_ADDRESS = '127.0.0.1';
/** The Prometheus endpoint's port when `metrics` names none (docs/operations.md "Metrics"). */
export const DEFAULT_METRICS_PORT = 9471;

export const LIMIT_DEFAULTS = {
  queueDepth: 128,
  maxIo: 1024 * 1024,
  inCapsuleData: 8192,
  maxSessions: 64,
  keepaliveMs: 5000,
  drainTimeoutMs: 10_000,
  /** docs/protocol.md §4: from TCP accept to LOGIN_RSP. */
  loginTimeoutMs: 10_000,
  /** As many as max_sessions can be logging in at once. */
  preLoginConnections: 64,
  /**
   * One source address may hold this share of pre_login_connections (rounded up), unless
   * pre_login_per_source is set: a quarter, so that at least four peers can log in at once.
   */
  preLoginPerSourceShare: 4,
  /** Room for queue_depth 128 at the default 8 KiB + 48 capsule four times over. */
  connectionMemory: 4 * 1024 * 1024,
} as const;

export const LIMIT_RANGES = {
  queueDepth: [1, 4096],
  maxIo: [4096, 16 * 1024 * 1024],
  inCapsuleData: [0, 65536],
  maxSessions: [1, 4096],
  keepaliveMs: [1000, 600_000],
  drainTimeoutMs: [0, 600_000],
  loginTimeoutMs: [100, 600_000],
  preLoginConnections: [1, 65_536],
  preLoginPerSource: [1, 65_536],
  connectionMemory: [64 * 1024, 1024 * 1024 * 1024],
} as const;

/** QoS bursts (docs/operations.md "QoS limits"): the default, and the most one may be. */
export const QOS_BURST_MS_DEFAULT = 100;
export const QOS_BURST_MS_MAX = 60_000;
/** Below a block a second a bandwidth limit cannot let a 512-byte command through at a useful pace. */
export const QOS_MIN_BPS = 4096;

/** HMAC-SHA256 keys shorter than this are guessable offline from one captured login. */
export const MIN_SECRET_LENGTH = 16;

// shm and the *;ofi_rxm layers are RDM endpoints (docs/transport.md "RDM endpoints").
export const PROVIDERS = ['tcp', 'sockets', 'verbs', 'shm', 'tcp;ofi_rxm', 'verbs;ofi_rxm', 'efa', 'auto'] as const;
export const BLOCK_SIZES = [512, 4096] as const;
export const ACCESS_MODES = ['rw', 'ro'] as const;
export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export const LOG_FORMATS = ['text', 'json'] as const;
/** How a file or block-device volume's I/O runs (target/backend/positional-io.ts). */
export const IO_ENGINES = ['auto', 'io_uring', 'threads'] as const;

export type Provider = (typeof PROVIDERS)[number];
/** What a listener speaks: one registered front end's name (target/front-end/registry.ts). */
export type ListenerProtocol = FrontEndName;
export type BlockSize = (typeof BLOCK_SIZES)[number];
export type IoEngineSetting = (typeof IO_ENGINES)[number];
export type Access = (typeof ACCESS_MODES)[number];
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogFormat = (typeof LOG_FORMATS)[number];

// Annotation keyword: the sentence to print when a `pattern` does not match, instead of the
// regular expression itself. Registered with ajv in loader.ts.
export const PATTERN_MESSAGE = 'patternMessage';

const sizeValue = { type: ['integer', 'string'] };

/** TARGET PORT GROUP and RELATIVE TARGET PORT IDENTIFIER are 16 bits; 0 is reserved (SPC-4 7.8.6.6, 7.8.6.7). */
const portGroupNumber = { type: 'integer', minimum: 1, maximum: 65535 };
/** One target port group, as this gateway and each of its peers are described under `alua`. */
const portGroupProperties = { group: portGroupNumber, state: { enum: [...ALUA_STATES] }, relative_port: portGroupNumber };

/** One set of QoS limits (docs/operations.md "QoS limits"): commands per second, and bytes per second as sizes (100MiB). */
const qosLimits = {
  iops: { type: 'integer', minimum: 1 },
  read_iops: { type: 'integer', minimum: 1 },
  write_iops: { type: 'integer', minimum: 1 },
  bps: sizeValue,
  read_bps: sizeValue,
  write_bps: sizeValue,
  // How long, at each limit's rate, an idle volume may run at once (qos-bucket.ts).
  burst_ms: { type: 'integer', minimum: 0, maximum: QOS_BURST_MS_MAX },
};

const initiatorName = {
  type: 'string',
  pattern: '^[A-Za-z0-9._:@-]{1,223}$',
  [PATTERN_MESSAGE]: 'must be 1 to 223 characters of letters, digits and . _ : @ -',
};

export const configSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  properties: {
    // The name initiators log in to (LOGIN_REQ target name, docs/protocol.md §8).
    target_name: initiatorName,
    // The NVMe subsystem NQN of the nvme-tcp listeners (docs/nvme.md "Configuration"); default derived from target_name.
    nqn: {
      type: 'string',
      pattern: '^nqn\\.[0-9]{4}-[0-9]{2}\\.[A-Za-z0-9._:@-]{1,210}$',
      [PATTERN_MESSAGE]: 'must be an NQN: nqn.yyyy-mm.<reversed domain>:<name>, at most 223 characters of letters, digits and . _ : @ -',
    },
    listeners: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        properties: {
          protocol: { enum: [...FRONT_END_NAMES] },
          provider: { enum: [...PROVIDERS] },
          address: { type: 'string', minLength: 1 },
          // 0 asks for any free port; only tests want that.
          port: { type: 'integer', minimum: 0, maximum: 65535 },
          // nvme-tcp: serve only the discovery controller (docs/nvme.md "Discovery"); port 8009 by default.
          discovery: { type: 'boolean' },
        },
      },
    },
    volumes: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        properties: {
          name: {
            type: 'string',
            pattern: '^[A-Za-z0-9._-]{1,64}$',
            [PATTERN_MESSAGE]: 'must be 1 to 64 characters of letters, digits and . _ -',
          },
          // path, memory, direct, io_engine, rbd: what each backend kind brings.
          ...kindProperties(),
          size: sizeValue,
          block_size: { enum: [...BLOCK_SIZES] },
          physical_block_size: { enum: [...BLOCK_SIZES] },
          read_only: { type: 'boolean' },
          thin: { type: 'boolean' },
          // Space warnings before writes fail with NO SPACE (docs/operations.md "Space thresholds"): percent used.
          space_threshold: {
            type: 'object',
            additionalProperties: false,
            properties: { filesystem: { type: 'integer', minimum: 1, maximum: 99 }, allocated: { type: 'integer', minimum: 1, maximum: 99 } },
          },
          // The Unit Serial Number VPD page (SPC-5) is ASCII; 20 characters fit every initiator's buffer.
          serial: {
            type: 'string',
            pattern: '^[\\x21-\\x7e]{1,20}$',
            [PATTERN_MESSAGE]: 'must be 1 to 20 printable ASCII characters without spaces',
          },
          // RFC 4122 (versions 1-8 as RFC 9562 extends it): the source of the VPD 0x83 designator.
          uuid: {
            type: 'string',
            pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$',
            [PATTERN_MESSAGE]: 'must be an RFC 4122 UUID such as 6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b',
          },
          lun: { type: 'integer', minimum: 0, maximum: 255 },
          // The NVMe namespace ID on nvme-tcp listeners (docs/nvme.md "Configuration"); default LUN + 1. At most NN (16383).
          nsid: { type: 'integer', minimum: 1, maximum: 16383 },
          qos: {
            type: 'object',
            additionalProperties: false,
            properties: {
              ...qosLimits,
              initiators: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['initiator'],
                  properties: {
                    initiator: {
                      type: 'string',
                      pattern: '^[A-Za-z0-9._:@*?-]{1,223}$',
                      [PATTERN_MESSAGE]: 'must be an initiator name or a glob using * and ?',
                    },
                    ...qosLimits,
                  },
                },
              },
            },
          },
          acl: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['initiator', 'access'],
              properties: {
                initiator: {
                  type: 'string',
                  pattern: '^[A-Za-z0-9._:@*?-]{1,223}$',
                  [PATTERN_MESSAGE]: 'must be an initiator name or a glob using * and ?',
                },
                access: { enum: [...ACCESS_MODES] },
              },
            },
          },
        },
      },
    },
    auth: {
      type: 'object',
      additionalProperties: false,
      properties: {
        required: { type: 'boolean' },
        initiators: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['name'],
            properties: {
              name: initiatorName,
              secret: { type: 'string' },
              secret_file: { type: 'string', minLength: 1 },
            },
          },
        },
      },
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        queue_depth: { type: 'integer', minimum: LIMIT_RANGES.queueDepth[0], maximum: LIMIT_RANGES.queueDepth[1] },
        max_io: sizeValue,
        in_capsule_data: sizeValue,
        max_sessions: { type: 'integer', minimum: LIMIT_RANGES.maxSessions[0], maximum: LIMIT_RANGES.maxSessions[1] },
        keepalive_ms: { type: 'integer', minimum: LIMIT_RANGES.keepaliveMs[0], maximum: LIMIT_RANGES.keepaliveMs[1] },
        drain_timeout_ms: {
          type: 'integer',
          minimum: LIMIT_RANGES.drainTimeoutMs[0],
          maximum: LIMIT_RANGES.drainTimeoutMs[1],
        },
        login_timeout_ms: { type: 'integer', minimum: LIMIT_RANGES.loginTimeoutMs[0], maximum: LIMIT_RANGES.loginTimeoutMs[1] },
        pre_login_connections: {
          type: 'integer',
          minimum: LIMIT_RANGES.preLoginConnections[0],
          maximum: LIMIT_RANGES.preLoginConnections[1],
        },
        pre_login_per_source: {
          type: 'integer',
          minimum: LIMIT_RANGES.preLoginPerSource[0],
          maximum: LIMIT_RANGES.preLoginPerSource[1],
        },
        connection_memory: sizeValue,
      },
    },
    logging: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: { enum: [...LOG_LEVELS] },
        format: { enum: [...LOG_FORMATS] },
      },
    },
    control: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' },
        socket: { type: 'string', minLength: 1 },
      },
    },
    // Present: the Prometheus endpoint is served (off without it).
    metrics: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' },
        address: { type: 'string', minLength: 1 },
        // 0 asks for any free port; only tests want that.
        port: { type: 'integer', minimum: 0, maximum: 65535 },
      },
    },
    state_dir: { type: 'string', minLength: 1 },
    // Drop-in volume files (docs/operations.md "Volumes from rblkd ctl"); default volumes.d beside this file.
    volumes_dir: { type: 'string', minLength: 1 },
    // This gateway's target port group and ALUA state, and its peers' (docs/operations.md "Several gateways").
    alua: {
      type: 'object',
      additionalProperties: false,
      required: ['group'],
      properties: {
        ...portGroupProperties,
        peers: { type: 'array', items: { type: 'object', additionalProperties: false, required: ['group'], properties: portGroupProperties } },
      },
    },
    // READ and WRITE on the native fast path (docs/operations.md "fast_path"); on unless false.
    fast_path: SWITCH_SCHEMA,
    // Native threads for the fast path's connections (docs/operations.md "reactors"); auto unless set.
    reactors: { type: ['integer', 'string'], minimum: 0, maximum: 64, pattern: '^auto$', [PATTERN_MESSAGE]: "must be a number of threads from 0 to 64, or 'auto'" },
    // Spin on a fabric connection's CQ before the loop sleeps (docs/operations.md "busy_poll_us"); 0 unless set.
    busy_poll_us: { type: 'integer', minimum: 0, maximum: MAX_BUSY_POLL_US },
  },
};

export interface ListenerConfig {
  /** A registered front end (rblk, the default, or iscsi); one that brings its own transport has provider tcp. */
  protocol: ListenerProtocol;
  provider: Provider;
  address: string;
  port: number;
  /** Serves only the front end's discovery service (nvme-tcp: docs/nvme.md "Discovery"). */
  discovery?: boolean;
  /** Its line in the config file, for messages; absent for the default listener. */
  line?: number;
}

/** Where a volume's blocks live, one registered kind's (target/backend/registry.ts). Relative paths have already been made absolute. */
export type VolumeBacking = RegisteredBacking;

export interface AclEntry {
  /** An initiator name, or a glob with * and ?. */
  initiator: string;
  access: Access;
}

/** One set of QoS limits; absent keys are no limit (docs/operations.md "QoS limits"). */
export interface QosLimits {
  iops?: number;
  readIops?: number;
  writeIops?: number;
  /** Bytes per second. */
  bps?: number;
  readBps?: number;
  writeBps?: number;
  /** burst_ms, or QOS_BURST_MS_DEFAULT. */
  burstMs: number;
}

export interface QosInitiatorLimits extends QosLimits {
  /** An initiator name, or a glob with * and ?: each initiator it matches gets these limits of its own. */
  initiator: string;
}

export interface QosConfig extends QosLimits {
  /** First match wins, as in the ACL (config/acl.ts). */
  initiators: readonly QosInitiatorLimits[];
}

export interface VolumeConfig {
  name: string;
  backing: VolumeBacking;
  blockSize: BlockSize;
  /** The physical block reported in READ CAPACITY(16), at least blockSize; absent: 4096 (logical-unit.ts). */
  physicalBlockSize?: BlockSize;
  readOnly: boolean;
  /** O_DIRECT. */
  direct: boolean;
  /** How file and block-device I/O runs: io_uring, the libuv thread pool, or auto (io_uring when a ring opens). */
  ioEngine: IoEngineSetting;
  /** Thin provisioning: UNMAP deallocates, and the LU reports LBPME (SBC-4, logical block provisioning). */
  thin: boolean;
  /**
   * File volumes: warn (log, metric, 38/07 unit attention, NVMe SMART/Health event) when the
   * backing filesystem is more than `filesystem` percent used (default 90) or the file has
   * more than `allocated` percent of its size allocated (docs/operations.md "Space thresholds").
   */
  spaceThreshold?: { filesystem?: number; allocated?: number };
  /** Configured or assigned in order: the lowest LUN not taken. */
  lun: number;
  /** The NVMe namespace ID (`nsid:`); absent: lun + 1 (docs/nvme.md "Configuration"). */
  nsid?: number;
  serial?: string;
  /** Lower case. */
  uuid?: string;
  /** Absent: every initiator that may log in gets rw. First matching entry wins; no match, no access. */
  acl?: readonly AclEntry[];
  /** IOPS and bandwidth limits (config/qos.ts); absent: none. A reload changes them live. */
  qos?: QosConfig;
}

export interface InitiatorCredential {
  name: string;
  /** The HMAC key itself, read from secret_file when that was given. Never log it. */
  secret: string;
  secretFile?: string;
}

export interface AuthConfig {
  required: boolean;
  initiators: readonly InitiatorCredential[];
}

export interface LimitsConfig {
  /** Credits per session: receive buffers posted for it. */
  queueDepth: number;
  /** Largest data transfer of one command, bytes; a power of two. */
  maxIo: number;
  /** Largest immediate write data carried in a command capsule, bytes. */
  inCapsuleData: number;
  maxSessions: number;
  keepaliveMs: number;
  drainTimeoutMs: number;
  /** From TCP accept to LOGIN_RSP, fabric connection request included. */
  loginTimeoutMs: number;
  /** Connections accepted and not yet logged in; more are refused at connect. */
  preLoginConnections: number;
  /** Of those, how many one source address may hold, over all listeners; default a quarter of preLoginConnections. */
  preLoginPerSource: number;
  /** Receive-ring bytes one session may register; the granted queue depth is lowered to fit. */
  connectionMemory: number;
}

export interface LoggingConfig {
  level: LogLevel;
  format: LogFormat;
}

export interface ControlConfig {
  /** Absolute path of the Unix socket, or null when `control.enabled` is false. */
  socket: string | null;
  /** Whether the file named the path (a taken socket then refuses the start) or the default was used. */
  explicit: boolean;
}

/** One target port group: this gateway's, or a peer's as this gateway reports it. */
export interface PortGroupConfig {
  group: number;
  state: AluaState;
  /** The relative target port of the group's one port; the group number unless configured. */
  relativePort: number;
}

export interface AluaConfig {
  local: PortGroupConfig;
  peers: readonly PortGroupConfig[];
}

export interface MetricsConfig {
  address: string;
  port: number;
}

export interface Config {
  /** The file (or name) the configuration was read from. */
  source: string;
  /** The name initiators log in to; DEFAULT_TARGET_NAME when the file names none. */
  targetName: string;
  /** The NVMe subsystem NQN (`nqn:`); absent: derived from targetName (docs/nvme.md "Configuration"). */
  nqn?: string;
  listeners: readonly ListenerConfig[];
  volumes: readonly VolumeConfig[];
  auth: AuthConfig;
  limits: LimitsConfig;
  logging: LoggingConfig;
  control: ControlConfig;
  /** The Prometheus endpoint, or null when it is off (the default). */
  metrics: MetricsConfig | null;
  stateDir: string;
  /** Where drop-in volume files are read from and `rblkd ctl create` writes them (docs/operations.md "Volumes from rblkd ctl"). */
  volumesDir: string;
  /**
   * state_dir/luns.json as this config would leave it: every volume's LUN, and those of
   * removed volumes still remembered (config/lun-record.ts; docs/operations.md "Stable LUNs").
   */
  luns: LunRecordUpdate;
  /** fast_path: READ and WRITE to file, block-device and rbd volumes handled natively (docs/target.md "Fast path"). */
  fastPath: boolean;
  /**
   * reactors: native threads that serve fast-path connections' data path
   * (docs/target.md "Reactors"); 'auto' picks a count from the cores at start
   * (native/reactors.ts autoCount), 0 keeps everything on the JS thread.
   */
  reactors: number | 'auto';
  /**
   * busy_poll_us: how long the JS thread spins on a fabric connection's
   * completion queue before it sleeps, in µs (docs/operations.md
   * "busy_poll_us"); 0, the default, waits on the fd alone.
   */
  busyPollMicros: number;
  /** Target port groups (ALUA, target/scsi/port-groups.ts), or null: INQUIRY TPGS 00b, no REPORT TARGET PORT GROUPS. */
  alua: AluaConfig | null;
  /** Legal but probably unintended settings, for the daemon to log and --check-config to print. */
  warnings: readonly ConfigIssue[];
}
