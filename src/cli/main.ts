// The command line: one file per command. Loaded only when podnet runs as a command, never on the
// CNI plugin path.
import { Command } from 'commander';
import { toPodnetError } from '../errors.ts';
import { podnetVersion } from '../version.ts';
import { daemonCommand } from './daemon.ts';
import { podsCommand } from './pods.ts';
import { applyCommand } from './apply.ts';
import { deleteCommand } from './delete.ts';
import { diffCommand } from './diff.ts';
import { explainCommand } from './explain.ts';
import { statusCommand } from './status.ts';
import { versionCommand } from './version.ts';
import { installCommand } from './install.ts';
import { uninstallCommand } from './uninstall.ts';

export function program(): Command {
  return new Command('podnet')
    .description('change the network of running pods; run as a CNI plugin when CNI_COMMAND is set')
    .version(podnetVersion, '--version')
    .addCommand(daemonCommand())
    .addCommand(podsCommand())
    .addCommand(statusCommand())
    .addCommand(applyCommand())
    .addCommand(deleteCommand())
    .addCommand(diffCommand())
    .addCommand(explainCommand())
    .addCommand(installCommand())
    .addCommand(uninstallCommand())
    .addCommand(versionCommand());
}

export async function cliMain(argv: readonly string[]): Promise<void> {
  try {
    await program().parseAsync([...argv], { from: 'node' });
  } catch (err) {
    const e = toPodnetError(err);
    process.stderr.write(`podnet: ${e.message}${e.details ? ` (${e.details})` : ''}\n`);
    process.exitCode = 1;
  }
}
