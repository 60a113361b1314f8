import { Command } from 'commander';
import { defaultConfigDir } from '../protocol/paths.ts';
import { removeFile } from '../registry/atomic-file.ts';
import { documentName } from '../model/identity.ts';
import { documentPath, readDocumentsFile } from './documents-file.ts';

export function deleteCommand(): Command {
  return new Command('delete')
    .description('standalone: remove documents; the daemon takes back what they caused')
    .requiredOption('-f, --filename <file>', 'the YAML or JSON file the documents were applied from, - for stdin')
    .option('--config-dir <dir>', 'the folder the daemon follows', defaultConfigDir)
    .action((options: { filename: string; configDir: string }) => {
      for (const doc of readDocumentsFile(options.filename)) {
        const removed = removeFile(documentPath(options.configDir, doc));
        process.stdout.write(`${documentName(doc)} ${removed ? 'deleted' : 'was not applied'}\n`);
      }
    });
}
