import { Command } from 'commander';
import { stringify } from 'yaml';
import { defaultConfigDir } from '../protocol/paths.ts';
import { ensurePrivateDir, writeFileAtomic } from '../registry/atomic-file.ts';
import { documentName } from '../model/desired.ts';
import { documentPath, readDocumentsFile } from './documents-file.ts';

export function applyCommand(): Command {
  return new Command('apply')
    .description('standalone: put Network and PodNetworkConfig documents where the daemon follows them')
    .requiredOption('-f, --filename <file>', 'a YAML or JSON file of documents, - for stdin')
    .option('--config-dir <dir>', 'the folder the daemon follows', defaultConfigDir)
    .action((options: { filename: string; configDir: string }) => {
      const documents = readDocumentsFile(options.filename);
      ensurePrivateDir(options.configDir);
      for (const doc of documents) {
        writeFileAtomic(documentPath(options.configDir, doc), stringify(doc));
        process.stdout.write(`${documentName(doc)} applied\n`);
      }
    });
}
