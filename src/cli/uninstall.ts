import { Command } from 'commander';
import { uninstallFromDirs } from '../install/install.ts';
import { takeBackEverything } from '../daemon/take-back.ts';
import { acquireStateLock } from '../daemon/lock.ts';
import { jsonLogger } from '../log.ts';
import { defaultCniBinDir, defaultCniConfDir, defaultPluginTimeoutMs, defaultStateDir } from '../protocol/paths.ts';
import { existsSync } from 'node:fs';

interface UninstallFlags {
  cniBinDir: string;
  cniConfDir: string;
  stateDir: string;
  keepPods?: boolean;
}

export function uninstallCommand(): Command {
  return new Command('uninstall')
    .description("take podnet out of the runtime's CNI config and bin dir, and take back what it changed on this node's pods and host (the daemon must be stopped)")
    .option('--cni-bin-dir <dir>', 'where the runtime finds CNI plugins', defaultCniBinDir)
    .option('--cni-conf-dir <dir>', "where the runtime finds its CNI network config", defaultCniConfDir)
    .option('--state-dir <dir>', "the daemon's state dir", defaultStateDir)
    .option('--keep-pods', "leave the pods' interfaces, routes and settings as podnet made them")
    .action(async (flags: UninstallFlags) => {
      const hasState = existsSync(flags.stateDir);
      // Refused before anything changes when a daemon runs, with --keep-pods too: it would chain
      // podnet again, now with no executable for the runtime to find, and put back what is taken back.
      if (hasState) acquireStateLock(flags.stateDir).release();
      const takeBack = !flags.keepPods && hasState;
      const dirs = uninstallFromDirs(flags.cniBinDir, flags.cniConfDir);
      const lines = [
        ...dirs.unchained.map((f) => `took podnet out of ${f}`),
        ...dirs.restored.map((f) => `gave back ${f} as it was before podnet`),
        dirs.binary === 'removed' ? `removed ${flags.cniBinDir}/podnet` : `${flags.cniBinDir}/podnet was not there`,
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
      if (!takeBack) return;
      // Delegated Networks' plugins are run where the runtime finds them, DEL taking their part back.
      const { sandboxes } = await takeBackEverything(flags.stateDir, jsonLogger(), { binDirs: [flags.cniBinDir], timeoutMs: defaultPluginTimeoutMs });
      process.stdout.write(`took back podnet's changes in ${sandboxes} pod sandbox${sandboxes === 1 ? '' : 'es'}\n`);
    });
}
