/*
 * Where a freeze window's time went. Pure, so the workflow's result and the bench's contenders
 * (bench/contender-*.ts) split their windows by the same arithmetic.
 */

/** One call inside the window, both ends on the same clock (ms). */
export interface TimedCall {
  startedAt: number;
  returnedAt: number;
}

export interface WindowBreakdown {
  /** The first call's start → the last call's return. */
  windowMs: number;
  /** Each call's own duration, by name, in window order. */
  calls: Record<string, number>;
  /** Between consecutive calls, keyed `<previous>→<next>`: the orchestration's own cost. */
  between: Record<string, number>;
  /** windowMs minus every call's duration. */
  gaps: number;
}

/** `calls` in the order they ran; an empty list is an empty window. */
export function windowBreakdown(calls: readonly (readonly [string, TimedCall])[]): WindowBreakdown {
  const out: WindowBreakdown = { windowMs: 0, calls: {}, between: {}, gaps: 0 };
  if (!calls.length) return out;
  out.windowMs = calls[calls.length - 1]![1].returnedAt - calls[0]![1].startedAt;
  let inCalls = 0;
  calls.forEach(([name, c], i) => {
    out.calls[name] = c.returnedAt - c.startedAt;
    inCalls += out.calls[name];
    if (i > 0) out.between[`${calls[i - 1]![0]}→${name}`] = c.startedAt - calls[i - 1]![1].returnedAt;
  });
  out.gaps = out.windowMs - inCalls;
  return out;
}

/**
 * Calls timed by one clock read after each (`marks`: name and the time it returned), each taken
 * to start when the previous one returned, the first at `startMs`: their gaps are 0 by construction.
 */
export function backToBack(startMs: number, marks: readonly (readonly [string, number])[]): [string, TimedCall][] {
  let at = startMs;
  return marks.map(([name, returnedAt]) => {
    const call: [string, TimedCall] = [name, { startedAt: at, returnedAt }];
    at = returnedAt;
    return call;
  });
}

/** One decimal place: what the result reports (sub-ms clocks, not sub-0.1 ms truths). */
export function roundMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}
