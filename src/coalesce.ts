// One run at a time: a call during a run asks for one more run after it, and any number of such
// calls merge into that one. For work that is level-triggered (replay the spool, reconcile every
// sandbox), where a burst of triggers needs one run that starts after the last of them.

export interface Coalesced {
  /** Resolves when a run that started after this call is done. */
  (): Promise<void>;
  /** Resolves when no run is under way. */
  idle(): Promise<void>;
}

/** `work` handles its own errors; a rejection ends the runs it was part of. */
export function coalesce(work: () => Promise<void>): Coalesced {
  let running: Promise<void> | undefined;
  let again = false;
  const request = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await work();
      } while (again);
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
  return Object.assign(request, { idle: async () => void (await running?.catch(() => undefined)) });
}
