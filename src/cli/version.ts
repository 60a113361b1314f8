import { Command } from 'commander';
import { podnetVersion } from '../version.ts';
import { supportedVersions } from '../protocol/cni-version.ts';

export function versionCommand(): Command {
  return new Command('version').description('print the podnet version and the CNI versions it speaks').action(() => {
    process.stdout.write(`podnet ${podnetVersion}\nCNI spec versions: ${supportedVersions.join(', ')}\n`);
  });
}
