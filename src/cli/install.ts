import { Command } from 'commander';
import { isSea } from 'node:sea';
import { install } from '../install/install.ts';
import { podnetEntry } from '../install/conflist.ts';
import { PodnetError } from '../errors.ts';
import { defaultCniBinDir, defaultCniConfDir } from '../protocol/paths.ts';


interface InstallFlags {
  cniBinDir: string;
  cniConfDir: string;
  binary?: string;
  socket?: string;
  stateDir?: string;
  timeoutMs?: string;
  firstPassTimeoutMs?: string;
  waitSeconds: string;
}

export function installCommand(): Command {
  return new Command('install')
    .description("copy podnet into the CNI bin dir and chain it after the primary plugin in the runtime's CNI config (what the installer DaemonSet's init container runs)")
    .option('--cni-bin-dir <dir>', 'where the runtime finds CNI plugins', defaultCniBinDir)
    .option('--cni-conf-dir <dir>', "where the runtime finds its CNI network config", defaultCniConfDir)
    .option('--binary <path>', 'the podnet executable to copy (default: this one)')
    .option('--socket <path>', "the daemon's socket, written into podnet's config entry when not the default")
    .option('--state-dir <dir>', "the daemon's state dir, written into podnet's config entry when not the default")
    .option('--timeout-ms <n>', "how long the plugin's CHECK waits for the daemon, written into podnet's config entry")
    .option('--first-pass-timeout-ms <n>', "how long the plugin's ADD waits for the daemon to make what a new pod asks (0: it does not wait), written into podnet's config entry")
    .option('--wait-seconds <n>', "how long to wait for the primary plugin's config to appear", '300')
    .action(async (flags: InstallFlags) => {
      const waitMs = Number(flags.waitSeconds) * 1000;
      if (!(waitMs >= 0)) throw new PodnetError('INVALID_CONFIG', `--wait-seconds must be a number of seconds, not "${flags.waitSeconds}"`);
      const timeoutMs = flags.timeoutMs === undefined ? undefined : Number(flags.timeoutMs);
      const firstPassTimeoutMs = flags.firstPassTimeoutMs === undefined ? undefined : Number(flags.firstPassTimeoutMs);
      const binary = flags.binary ?? (isSea() ? process.execPath : undefined);
      if (binary === undefined) throw new PodnetError('INVALID_CONFIG', 'podnet runs from its sources here, not as the built executable: give --binary dist/podnet');
      const outcome = await install({
        binDir: flags.cniBinDir,
        confDir: flags.cniConfDir,
        binary,
        entry: podnetEntry({ socketPath: flags.socket, stateDir: flags.stateDir, timeoutMs, firstPassTimeoutMs }),
        waitMs,
      });
      const lines = [
        outcome.binary === 'copied' ? `copied ${binary} to ${flags.cniBinDir}/podnet` : `${flags.cniBinDir}/podnet is already this executable`,
        {
          chained: `chained podnet into ${outcome.config}`,
          converted: `chained podnet into ${outcome.config}, made from the single-plugin config beside it (kept as *.podnet-original)`,
          unchanged: `${outcome.config} already chains podnet`,
        }[outcome.chained],
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    });
}
