import type { Clock } from '../ports/clock.ts';

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
}

/**
 * Virtual time for simulations with many thousands of sleepers (the controller over 10,000 control
 * planes): the same rule as VirtualClock (time jumps to the earliest timer once every runnable chain
 * has settled), but timers sit in a binary heap and every timer due at that instant fires in one
 * step, so a step costs O(log n) per timer instead of a scan of all of them.
 */
export class HeapClock implements Clock {
  private readonly heap: Timer[] = [];
  private seq = 0;
  private pumping = false;
  /** Timers fired so far. */
  fired = 0;

  constructor(private current = 0) {}

  now(): number {
    return this.current;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.push({ at: this.current + Math.max(0, ms), seq: this.seq++, fire: resolve });
      this.pump();
    });
  }

  get pending(): number {
    return this.heap.length;
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    setImmediate(() => {
      this.pumping = false;
      const first = this.heap[0];
      if (!first) return;
      this.current = Math.max(this.current, first.at);
      while (this.heap[0] && this.heap[0].at <= this.current) {
        const timer = this.pop();
        this.fired++;
        timer?.fire();
      }
      if (this.heap.length > 0) this.pump();
    });
  }

  private before(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private push(timer: Timer): void {
    const heap = this.heap;
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent];
      if (!p || !this.before(timer, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = timer;
  }

  private pop(): Timer | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length === 0 || !last) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = last;
      let at = -1;
      const l = heap[left];
      const r = heap[right];
      if (l && this.before(l, smallest)) {
        smallest = l;
        at = left;
      }
      if (r && this.before(r, smallest)) {
        smallest = r;
        at = right;
      }
      if (at < 0) break;
      heap[i] = smallest;
      i = at;
    }
    heap[i] = last;
    return top;
  }
}
