import { Command } from 'commander';
import { stringify } from 'yaml';
import { defaultConfigDir } from '../protocol/paths.ts';
import { ensurePrivateDir, writeFileAtomic } from '../registry/atomic-file.ts';
import { documentName } from '../model/desired.ts';
import { documentProblems } from '../model/document-problems.ts';
import { configDirReader } from '../sources/config-dir.ts';
import { withDocuments } from '../sources/source.ts';
import { documentPath, readDocumentsFile } from './documents-file.ts';

export function applyCommand(): Command {
  return new Command('apply')
    .description('standalone: put Network and PodNetworkConfig documents where the daemon follows them')
    .requiredOption('-f, --filename <file>', 'a YAML or JSON file of documents, - for stdin')
    .option('--config-dir <dir>', 'the folder the daemon follows', defaultConfigDir)
    .action((options: { filename: string; configDir: string }) => {
      const documents = readDocumentsFile(options.filename);
      ensurePrivateDir(options.configDir);
      // Judged as the daemon will judge them, beside the documents the folder holds already.
      const problems = documentProblems(withDocuments(configDirReader(options.configDir)(), documents));
      for (const doc of documents) {
        writeFileAtomic(documentPath(options.configDir, doc), stringify(doc));
        const name = documentName(doc);
        process.stdout.write(`${name} applied\n`);
        for (const p of problems.filter((p) => p.document === name)) {
          process.stdout.write(`  not applied on any pod: ${p.field}: ${p.reason}\n`);
        }
      }
    });
}
