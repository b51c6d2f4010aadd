// The life of one SCSI command on the target, for every front end, in the
// order of SPDK's request states and of nvmet's core: parse the CDB once
// against the logical unit, check it against what the front end offers, take
// a data buffer, fetch data-out, execute, push data-in, respond exactly once.
// An abort is checked before every step, so an aborted command answers TASK
// ABORTED and never moves data again (SAM-5 7.2); a bug answers HARDWARE
// ERROR rather than leave the command hanging (docs/target.md "One command").
import { buildSense, decodeSense } from '../../../protocol/scsi/sense.js';
import { INTERNAL_TARGET_FAILURE, INVALID_FIELD_IN_CDB, INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT, SenseKey, type SenseCode } from '../../../protocol/scsi/sense-codes.js';
import { ScsiStatus } from '../../../protocol/scsi/status.js';
import { parseCommand, type ScsiCommand } from '../scsi-command.js';
import { DataOutUnusable, type DataOffer, type RequestBuffer, type RequestFrontEnd, type RequestScope, type Residuals } from './front-end.js';
import { initiatorNameOf } from '../nexus.js';
import { classOfOpcode, IO_CLASSES } from './io-stats.js';
import { dataInToSend, NO_RESIDUALS, nothingMoved, residualsOf } from './residuals.js';

const IO_READ = IO_CLASSES.indexOf('read');
const IO_WRITE = IO_CLASSES.indexOf('write');

/** The core's own refusals are fixed-format sense (SPC-5 4.4.3), built per answer: the front end owns what it is given. */
const checkCondition = (code: SenseCode): Buffer => buildSense({ code });

/** No bidirectional commands: data moves only in the direction both the CDB and the offer name. */
function directionsAgree(command: ScsiCommand, offer: DataOffer): boolean {
  return command.transferLength === 0 || command.direction === offer.direction;
}

export class ScsiRequest<B extends RequestBuffer> {
  #aborted = false;
  #ended = false;
  /** When run() began (performance.now(), ms), for the latency histogram. */
  #started = 0;
  /** Bytes moved to or from the initiator so far, for the byte counters. */
  #moved = 0;
  /** Ends a wait for the QoS turn early (abort). */
  #wake: (() => void) | null = null;

  constructor(
    private readonly frontEnd: RequestFrontEnd<B>,
    private readonly scope: RequestScope,
    private readonly cdb: Buffer,
    private readonly offer: DataOffer,
  ) {}

  get aborted(): boolean {
    return this.#aborted;
  }

  /** Task management or the end of the session: the next abort point answers TASK ABORTED. */
  abort(): void {
    this.#aborted = true;
    // A command waiting for its QoS turn answers TASK ABORTED now, not when the turn comes.
    this.#wake?.();
  }

  /** Runs the command to its one response (or its failed transfer). Never rejects. */
  async run(): Promise<void> {
    const { frontEnd, scope } = this;
    let offer = this.offer;
    let data: B | null = null;
    this.#started = performance.now();
    try {
      const parsed = parseCommand(this.cdb, scope.lu, scope.access);
      if (!parsed.ok) return await this.respond(parsed.completion.status, parsed.completion.sense, nothingMoved(offer));
      let command = parsed.command;
      // The offer's bytes the command cannot use, as a residual of their own direction (offerInOtherDirection).
      let unused: Residuals | undefined;
      if (offer.otherDirection === 'moves-nothing' && command.transferLength > 0 && offer.direction !== command.direction) {
        unused = nothingMoved(offer);
        offer = { direction: command.direction, length: 0 };
      }
      const withUnused = (r: Residuals): Residuals => (unused ? { dataOut: r.dataOut + unused.dataOut, dataIn: r.dataIn + unused.dataIn } : r);
      let want = command.transferLength;
      const offeredOut = offer.direction === 'out' ? offer.length : 0;
      // The residual of a data-out the offer does not match: the offer against the CDB (negative: an overflow), as iSCSI reports it (RFC 7143 11.4.5).
      const outMismatch = { dataOut: offeredOut - want, dataIn: 0 };
      let residualOverride: Residuals | undefined;
      // A data-out the CDB sizes exactly, offered at another length (a COMPARE AND WRITE whose NLB wrapped to 0, a WRITE SAME of two blocks).
      if (command.exactDataOut && offeredOut !== want && (offer.direction !== 'in' || want > 0))
        return await this.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INVALID_FIELD_IN_CDB), withUnused(outMismatch));
      // Fewer bytes offered than the CDB transfers (none at all included). The
      // smaller of the two moves (SAM-5 5.5, docs/protocol.md §9.3): a block
      // write offered whole blocks runs as the shorter write they cover, with
      // the rest an overflow residual. Anything else is refused, nothing written.
      if (command.direction === 'out' && offer.direction !== 'in' && offeredOut < want) {
        const shorter = this.shortened(command, offeredOut);
        if (shorter === undefined) return await this.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT), withUnused(outMismatch));
        command = shorter;
        want = command.transferLength;
        residualOverride = outMismatch;
      }
      if (!directionsAgree(command, offer) || want > scope.maxTransfer) return await this.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INVALID_FIELD_IN_CDB), nothingMoved(offer));

      // QoS (target/scsi/qos.ts): a READ or WRITE waits for its turn before it takes a buffer; it is never refused for it.
      const cls = classOfOpcode(this.cdb[0]!);
      const lu = scope.lu;
      if (lu !== undefined && lu.qos.active && (cls === IO_READ || cls === IO_WRITE)) {
        const turn = lu.qos.admit(initiatorNameOf(scope.nexus), cls === IO_READ ? 'read' : 'write', want);
        if (turn !== null && !this.#aborted) {
          await new Promise<void>((resolve) => {
            this.#wake = resolve;
            void turn.then(resolve);
          });
          this.#wake = null;
        }
      }

      if (this.#aborted) return await this.respondAborted();
      data = await frontEnd.allocate(want);

      if (this.#aborted) return await this.respondAborted();
      if (command.direction === 'out' && want > 0) {
        try {
          await frontEnd.fetchDataOut(data, 0, want);
          this.#moved = want;
        } catch (e) {
          if (e instanceof DataOutUnusable) return await this.respond(ScsiStatus.CHECK_CONDITION, checkCondition(e.code), withUnused(nothingMoved(offer)));
          return this.transferFailed('data-out', e);
        }
      }

      if (this.#aborted) return await this.respondAborted();
      const done = await command.execute({ nexus: scope.nexus, data: data.buffer, access: scope.access, visibleLuns: scope.visibleLuns });

      if (this.#aborted) return await this.respondAborted();
      if (command.direction === 'in') {
        const n = dataInToSend(offer, done.dataLength);
        if (n > 0) {
          try {
            await frontEnd.pushDataIn(data, 0, n);
            this.#moved = n;
          } catch (e) {
            return this.transferFailed('data-in', e);
          }
        }
      }
      await this.respond(done.status, done.sense, withUnused(residualOverride ?? residualsOf(offer, command, done.dataLength)));
    } catch (e) {
      // Nothing SCSI throws (the core maps errors to sense in sense-map.ts):
      // this is a bug, or a front end that failed to answer.
      scope.log.error(`command ${frontEnd.label} failed unexpectedly: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      if (!this.#ended) {
        await this.respond(ScsiStatus.CHECK_CONDITION, checkCondition(INTERNAL_TARGET_FAILURE), NO_RESIDUALS).catch((e2: unknown) =>
          scope.log.error(`command ${frontEnd.label} could not be answered: ${e2 instanceof Error ? e2.message : String(e2)}`),
        );
      }
    } finally {
      data?.release();
    }
  }

  /** The block write `command` cut to the whole blocks of `bytes`, parsed again from its CDB; undefined when it cannot be. */
  private shortened(command: ScsiCommand, bytes: number): ScsiCommand | undefined {
    const field = command.transferLengthField;
    const lu = this.scope.lu;
    if (field === undefined || lu === undefined || bytes % lu.blockSize !== 0) return undefined;
    const cdb = Buffer.from(this.cdb);
    cdb.writeUIntBE(bytes / lu.blockSize, field.at, field.bytes);
    const again = parseCommand(cdb, lu, this.scope.access);
    return again.ok ? again.command : undefined;
  }

  private respondAborted(): Promise<void> {
    return this.respond(ScsiStatus.TASK_ABORTED, undefined, NO_RESIDUALS);
  }

  /** The one response. A command aborted by now answers TASK ABORTED, without sense, whatever it was going to say. */
  private respond(status: number, sense: Buffer | undefined, residuals: Residuals): Promise<void> {
    if (this.#ended) return Promise.resolve();
    this.#ended = true;
    this.count(failed(status, sense));
    if (this.#aborted) return this.frontEnd.complete(ScsiStatus.TASK_ABORTED, undefined, residuals);
    return this.frontEnd.complete(status, sense, residuals);
  }

  private transferFailed(step: 'data-out' | 'data-in', error: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.count(true);
    this.frontEnd.transferFailed(step, error);
  }

  /**
   * The one place a command is counted (io-stats.ts): its volume's counters
   * and its session's, once, as it ends. Plain increments, nothing allocated.
   */
  private count(error: boolean): void {
    const cls = classOfOpcode(this.cdb.length > 0 ? this.cdb[0]! : 0);
    const ms = performance.now() - this.#started;
    // Bytes count only for a command that ended GOOD: a write refused after its data came (a unit attention) wrote nothing.
    const bytes = error ? 0 : this.#moved;
    this.scope.lu?.stats.record(cls, bytes, error, ms);
    this.scope.io?.record(cls, bytes, error);
  }
}

/**
 * Whether an answer counts as an error in the volume's and session's counters
 * (docs/operations.md, `rblk_volume_errors_total`). A unit attention is the
 * target telling the initiator of an event (a login's power-on reset, a
 * resize, a mode change: SAM-5 5.14), not a failure of the command's I/O: it
 * is retried at once, and counted as an error it would make every login of a
 * healthy volume raise an error alert.
 */
function failed(status: number, sense: Buffer | undefined): boolean {
  if (status === ScsiStatus.GOOD || status === ScsiStatus.CONDITION_MET) return false;
  if (status === ScsiStatus.CHECK_CONDITION && sense !== undefined && decodeSense(sense)?.key === SenseKey.UNIT_ATTENTION) return false;
  return true;
}
