// How a pass runs its steps: through a journaled pass of the executor (a crash in it is taken back
// at the next start), or, for what has nothing to take back, as one batch; counted either way for
// the pass's metrics.
import { execute, type ReadBack, type Together } from '../executor/execute.ts';
import type { Step, Tool, Where } from '../model/step.ts';
import type { NetnsRunner } from '../netns/runner.ts';

export class PassSteps {
  private readonly run: NetnsRunner;
  private readonly stateDir: string;
  /** Steps run since the last `count()`. */
  private ran = 0;

  constructor(run: NetnsRunner, stateDir: string) {
    this.run = run;
    this.stateDir = stateDir;
  }

  /** Runs `steps` through a journaled pass under `key` (executor/execute.ts). */
  journaled(key: string, steps: readonly Step[], commit: (pass: string) => void, readBack?: ReadBack, together?: Together): ReturnType<typeof execute> {
    this.ran += steps.length;
    return execute(this.run, this.stateDir, key, steps, commit, readBack, together);
  }

  /** Runs `steps`, all of `tool` at `where`, as one batch with no journal: for steps with nothing to undo. */
  unjournaled(where: Where, tool: Tool, steps: readonly Step[]): ReturnType<NetnsRunner['batch']> {
    this.ran += steps.length;
    return this.run.batch(where, tool, steps.map((s) => s.line));
  }

  /** The steps run since the last call. */
  count(): number {
    const ran = this.ran;
    this.ran = 0;
    return ran;
  }
}
