// Residual counts (SAM-5 5.5), computed in one place for every front end:
// what the initiator offered against what the command moved.
import type { Direction } from '../command-spec.js';
import type { DataOffer, Residuals } from './front-end.js';

export const NO_RESIDUALS: Residuals = Object.freeze({ dataOut: 0, dataIn: 0 });

/** A command answered before any data moved: the whole offer, in its own direction only (docs/protocol.md §9.3). */
export function nothingMoved(offer: DataOffer): Residuals {
  if (offer.length === 0 || offer.direction === 'none') return NO_RESIDUALS;
  return offer.direction === 'out' ? { dataOut: offer.length, dataIn: 0 } : { dataOut: 0, dataIn: offer.length };
}

/** Data-in bytes to send: what the command produced, at most what the initiator offered. */
export function dataInToSend(offer: DataOffer, produced: number): number {
  return Math.min(produced, offer.length);
}

/**
 * A command that ran. Data-in: an underflow of what was offered and not
 * filled, or an overflow of what was produced beyond the offer. Data-out: the
 * offer beyond the CDB's transfer length (a shorter offer is refused before
 * the command runs, so this is never an overflow).
 */
export function residualsOf(offer: DataOffer, command: { readonly direction: Direction; readonly transferLength: number }, produced: number): Residuals {
  if (command.direction === 'in') {
    const dataIn = produced > offer.length ? -(produced - offer.length) : offer.length - dataInToSend(offer, produced);
    return dataIn === 0 ? NO_RESIDUALS : { dataOut: 0, dataIn };
  }
  if (offer.direction === 'out') {
    const dataOut = offer.length - command.transferLength;
    return dataOut === 0 ? NO_RESIDUALS : { dataOut, dataIn: 0 };
  }
  return NO_RESIDUALS;
}
