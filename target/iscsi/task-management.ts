// iSCSI task management functions (RFC 7143 §11.5): what each does to the
// connection's tasks and LUNs, and the response it ends with. The connection
// (connection.ts) sends the Task Management Function Response.
import type { MappedLun, TargetLogger } from '../connection/environment.js';
import { snLess, TmfFunction, TmfResponse } from './pdu.js';
import type { IscsiTask } from './task.js';

/** A task between its SCSI Command and its response. */
export interface ManagedTask {
  readonly task: IscsiTask;
  readonly lun: number;
  readonly request: { abort(): void } | null;
  readonly done: Promise<void>;
}

/** What task management reads of its connection. */
export interface TaskManagementHost {
  readonly luns: ReadonlyMap<number, MappedLun>;
  /** The running tasks, by ITT. */
  readonly tasks: ReadonlyMap<number, ManagedTask>;
  readonly expCmdSN: number;
  /** Whether the task with this ITT ended lately (its answer went out). */
  answeredRecently(itt: number): boolean;
  /** The connection's log as it is now. */
  readonly log: TargetLogger;
}

/** Runs task management function `fn` and resolves its response code (TmfResponse). */
export async function taskFunction(h: TaskManagementHost, fn: number, lun: number, ref: number, refCmdSN: number): Promise<number> {
  const lunScoped = fn === TmfFunction.ABORT_TASK || fn === TmfFunction.ABORT_TASK_SET || fn === TmfFunction.CLEAR_TASK_SET || fn === TmfFunction.LOGICAL_UNIT_RESET;
  const mapped = h.luns.get(lun);
  if (lunScoped && !mapped) return TmfResponse.NO_LUN;
  switch (fn) {
    case TmfFunction.ABORT_TASK: {
      const r = h.tasks.get(ref);
      // RFC 7143 §11.5.1: a RefCmdSN in the window that never arrived counts as received and
      // aborted (Function Complete); a task that ran and was answered does not exist any more.
      if (!r || r.task.lun !== lun) return snLess(refCmdSN, h.expCmdSN) && !h.answeredRecently(ref) ? TmfResponse.COMPLETE : TmfResponse.NO_TASK;
      await abort([r]);
      // Past its last abort point it ran to the end and answered: for the
      // initiator that task completed, so there was none to abort (RFC 7143 §11.6.1).
      return r.task.answered ? TmfResponse.NO_TASK : TmfResponse.COMPLETE;
    }
    case TmfFunction.ABORT_TASK_SET:
    case TmfFunction.CLEAR_TASK_SET:
      await abort([...h.tasks.values()].filter((r) => r.task.lun === lun));
      return TmfResponse.COMPLETE;
    case TmfFunction.LOGICAL_UNIT_RESET:
      await abort([...h.tasks.values()].filter((r) => r.task.lun === lun));
      // SAM-5 6.3.3: other nexuses see 29/00 on their next command.
      mapped!.lu.reset();
      h.log.info(`LUN ${lun} reset`);
      return TmfResponse.COMPLETE;
    case TmfFunction.TARGET_WARM_RESET:
    case TmfFunction.TARGET_COLD_RESET:
      await abort([...h.tasks.values()]);
      for (const m of h.luns.values()) m.lu.reset();
      h.log.info(`target ${fn === TmfFunction.TARGET_COLD_RESET ? 'cold' : 'warm'} reset of this session's LUNs`);
      return TmfResponse.COMPLETE;
    case TmfFunction.TASK_REASSIGN:
      return TmfResponse.NO_REASSIGNMENT;
    default:
      return TmfResponse.NOT_SUPPORTED;
  }
}

/** Aborts tasks silently (no response of their own: the TMF response speaks for them) and waits for them. */
async function abort(tasks: ManagedTask[]): Promise<void> {
  for (const r of tasks) {
    r.task.silenced = true;
    r.request?.abort();
    r.task.cancel('aborted by task management', false);
  }
  await Promise.allSettled(tasks.map((r) => r.done));
}
