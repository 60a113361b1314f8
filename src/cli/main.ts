// The command line: one file per command. Loaded only when podnet runs as a command, never on the
// CNI plugin path.
import { basename } from 'node:path';
import { Command } from 'commander';
import { toPodnetError } from '../errors.ts';
import { podnetVersion } from '../version.ts';
import { controllerCommand } from './controller.ts';
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
    .addCommand(controllerCommand())
    .addCommand(podsCommand())
    .addCommand(statusCommand())
    .addCommand(applyCommand())
    .addCommand(deleteCommand())
    .addCommand(diffCommand())
    .addCommand(explainCommand())
    .addCommand(installCommand())
    .addCommand(uninstallCommand())
    .addCommand(versionCommand())
    .addCommand(
      // Loaded when it runs: the API client it needs costs every other command (the daemon's start among them) its load.
      new Command('kubectl')
        .description('kubectl podnet without the link (kubectl-podnet on PATH): the podnet networks of your pods, from the API alone')
        .helpOption(false)
        .allowUnknownOption()
        .allowExcessArguments()
        .argument('[args...]')
        .action(async (args: string[]) => {
          const { kubectlProgram } = await import('./kubectl.ts');
          await kubectlProgram('podnet kubectl').parseAsync(args, { from: 'user' });
        }),
    );
}

/** Whether the executable runs as kubectl's plugin: kubectl starts it by the name it found on PATH. */
export function invokedAsKubectlPlugin(argv0: string): boolean {
  return /^kubectl-podnet$/.test(basename(argv0));
}

export async function cliMain(argv: readonly string[]): Promise<void> {
  const asKubectl = invokedAsKubectlPlugin(process.argv0) || argv[2] === 'kubectl';
  try {
    if (invokedAsKubectlPlugin(process.argv0)) await (await import('./kubectl.ts')).kubectlProgram().parseAsync([...argv], { from: 'node' });
    else await program().parseAsync([...argv], { from: 'node' });
  } catch (err) {
    const e = toPodnetError(err);
    process.stderr.write(asKubectl ? (await import('./kubectl.ts')).kubectlError(e) : `podnet: ${e.message}${e.details ? ` (${e.details})` : ''}\n`);
    process.exitCode = 1;
  }
}
