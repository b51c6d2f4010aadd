// rblk's task management (docs/protocol.md §14.1): ABORT TASK, ABORT TASK SET,
// LUN RESET, FENCE CONNECTION and FENCE GATEWAY. Each takes a credit and a tag
// as a command does until its TSK_RSP; an abort sends each aborted command's
// RSP before the TSK_RSP.
import { FENCE_VERSION, GATEWAY_FENCE_VERSION, Opcode, TaskFunction, TaskResponse, type Capsule, type TaskManagement } from '../../protocol/wire/index.js';
import type { ConnectionEnvironment, MappedLun, TargetLogger } from '../connection/environment.js';
import type { OutstandingCommand } from '../connection/front-end-connection.js';
import type { DataBuffer, TargetConnection } from '../transport/transport.js';
import { ProtocolViolation } from './violation.js';

/** What task management needs of its connection. */
export interface TaskManagementHost {
  readonly conn: TargetConnection<DataBuffer>;
  readonly env: ConnectionEnvironment;
  /** The connection's log as it is now. */
  readonly log: TargetLogger;
  meta(): Record<string, unknown>;
  readonly sessionId: bigint;
  readonly initiatorName: string;
  readonly luns: ReadonlyMap<number, MappedLun>;
  readonly outstanding: ReadonlyMap<bigint, OutstandingCommand>;
  /** Whether the connection has a fast path (a task holds its LU's off while it runs). */
  readonly fastPath: boolean;
  /** Throws a ProtocolViolation when the tag is in use or no credit is left. */
  admit(tag: bigint): void;
  /** Counts a task against the credits from now until what `start` returns settles (whose failure is the connection's to log). */
  track(start: () => Promise<void>, what: string): void;
  /** Whether a TSK_RSP may still go out (logged in, or ending with a T_LOGOUT on its way). */
  readonly answering: boolean;
  sendCapsule(c: Capsule): Promise<void>;
}

// §14.1: abort what was asked, send each aborted command's RSP, then TSK_RSP.
export function onTaskManagement(h: TaskManagementHost, t: TaskManagement): void {
  if (t.function === TaskFunction.FENCE_CONNECTION) return fenceOther(h, t);
  if (t.function === TaskFunction.FENCE_GATEWAY) return fenceGateway(h, t);
  h.admit(t.tag);
  // While a task management function runs, the LU's fast path is held off:
  // what it aborts or resets must not start there meanwhile (docs/target.md "Fast path").
  const lu = h.luns.get(t.lun)?.lu;
  h.track(() => (lu && h.fastPath ? lu.fastPath.hold(() => runTask(h, t)) : runTask(h, t)), 'task management');
}

/**
 * FENCE CONNECTION (§14.1, version 3): the initiator lost another of its
 * connections and is about to reissue that one's commands here. The target
 * may not have seen that loss yet; ending the connection now, and fencing
 * what of it is still in a backend, keeps the first copies from landing
 * after the reissued ones. Answered once the fence is in place.
 */
function fenceOther(h: TaskManagementHost, t: TaskManagement): void {
  if (h.conn.version < FENCE_VERSION) throw new ProtocolViolation(`FENCE CONNECTION on a version ${h.conn.version} connection (it needs version ${FENCE_VERSION})`);
  h.admit(t.tag);
  const id = String(t.taskTag);
  let response: TaskResponse = TaskResponse.COMPLETE;
  if (id !== String(h.sessionId)) {
    const r = h.env.fenceConnection(id, h.initiatorName, `fenced by the initiator from session ${h.sessionId} (it lost this connection)`);
    if (r === 'refused') response = TaskResponse.FAILED;
    h.log.info(`FENCE CONNECTION of session ${id}: ${r}`, h.meta());
  }
  h.track(() => h.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response }), 'fence connection');
}

/**
 * FENCE GATEWAY (§14.1, version 4): the initiator lost commands on another
 * gateway of the LUN's volume, the one of target port group `taskTag`, and
 * is about to reissue them here. That gateway may be frozen or cut off with
 * them in hand; it is fenced out of the store they share before the answer
 * (LogicalUnit.fenceGateway), so none of them lands after the reissued ones.
 */
function fenceGateway(h: TaskManagementHost, t: TaskManagement): void {
  if (h.conn.version < GATEWAY_FENCE_VERSION) throw new ProtocolViolation(`FENCE GATEWAY on a version ${h.conn.version} connection (it needs version ${GATEWAY_FENCE_VERSION})`);
  h.admit(t.tag);
  const lu = h.luns.get(t.lun)?.lu;
  const group = Number(t.taskTag);
  h.track(async () => {
    let response: TaskResponse = TaskResponse.INCORRECT_LUN;
    if (lu !== undefined) {
      const r = await lu.fenceGateway(group);
      response = r.ok ? TaskResponse.COMPLETE : TaskResponse.FAILED;
      h.log[r.ok ? 'info' : 'warn'](`FENCE GATEWAY of target port group ${group} on LUN ${t.lun}: ${r.what}`, h.meta());
    }
    if (!h.answering) return;
    await h.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response });
  }, 'fence gateway');
}

async function runTask(h: TaskManagementHost, t: TaskManagement): Promise<void> {
  h.log.debug(`TSK_MGMT ${taskName(t.function)} on LUN ${t.lun}${t.function === TaskFunction.ABORT_TASK ? ` for tag ${t.taskTag}` : ''} (tag ${t.tag})`);
  const mapped = h.luns.get(t.lun);
  let response: number = TaskResponse.COMPLETE;
  if (!mapped) response = TaskResponse.INCORRECT_LUN;
  else if (t.function === TaskFunction.ABORT_TASK) {
    const s = h.outstanding.get(t.taskTag);
    if (s && s.lun === t.lun) {
      s.request?.abort();
      await s.done;
    }
  } else if (t.function === TaskFunction.ABORT_TASK_SET) {
    const mine = [...h.outstanding.values()].filter((s) => s.lun === t.lun);
    for (const s of mine) s.request?.abort();
    await Promise.all(mine.map((s) => s.done));
  } else if (t.function === TaskFunction.LUN_RESET) {
    const mine = [...h.outstanding.values()].filter((s) => s.lun === t.lun);
    for (const s of mine) s.request?.abort();
    await Promise.all(mine.map((s) => s.done));
    // SAM-5 6.3.3: every nexus, this one included, sees 29/00 on its next command.
    mapped.lu.reset();
    h.log.info(`LUN ${t.lun} reset`);
  } else {
    response = TaskResponse.NOT_SUPPORTED;
  }
  if (!h.answering) return;
  h.log.debug(`TSK_RSP ${taskResponseName(response)} (tag ${t.tag})`);
  await h.sendCapsule({ op: Opcode.TSK_RSP, tag: t.tag, creditDelta: 1, response: response as TaskResponse });
}

function taskName(f: number): string {
  for (const [k, v] of Object.entries(TaskFunction)) if (v === f) return k;
  return `function 0x${f.toString(16)}`;
}

function taskResponseName(r: number): string {
  for (const [k, v] of Object.entries(TaskResponse)) if (v === r) return k;
  return `0x${r.toString(16)}`;
}
