// Reactor threads for the target's data path (native/src/core/reactor.h;
// docs/target.md "Reactors"): each connection whose fast path starts is given
// to the least loaded one, which from then on waits on and drains that
// connection's completion queue, io_uring ring and librbd queue on its own
// thread. The JavaScript thread stays the control plane.
import { availableParallelism } from 'node:os';
import { addon, type NativeReactors } from './binding.js';
import { FabricError } from './fabric-error.js';

export interface ReactorStats {
  connections: number;
  wakeups: number;
}

export class Reactors {
  readonly #native: NativeReactors;
  #closed = false;

  private constructor(native: NativeReactors) {
    this.#native = native;
  }

  /** Starts `count` threads (1..64). */
  static start(count: number): Reactors {
    try {
      return new Reactors(new (addon().Reactors)(count));
    } catch (e) {
      throw FabricError.from(e);
    }
  }

  /**
   * The default for `reactors: auto`: none below 4 cores, where the reactor
   * would compete with the JS thread, the kernel's TCP work and the backend
   * for the same cores (docs/performance.md "Reactor threads"); else half the
   * cores, at most 16.
   */
  static autoCount(cores: number = availableParallelism()): number {
    return cores < 4 ? 0 : Math.min(16, Math.floor(cores / 2));
  }

  /** The native handle, for FastPath's `reactors` option. */
  get native(): NativeReactors {
    return this.#native;
  }

  get size(): number {
    return this.#native.size;
  }

  get stats(): ReactorStats[] {
    return this.#closed ? [] : this.#native.stats;
  }

  /** Stops the threads: close the connections first (a connection still attached is not served after this). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#native.close();
  }
}
