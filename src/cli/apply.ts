import { resolve } from 'node:path';
import { Command } from 'commander';
import { stringify } from 'yaml';
import { PodnetError } from '../errors.ts';
import { defaultConfigDir, routes } from '../protocol/paths.ts';
import { ensurePrivateDir, writeFileAtomic } from '../registry/atomic-file.ts';
import { documentName } from '../model/identity.ts';
import { documentProblems } from '../model/document-problems.ts';
import { defaultLimits } from '../model/desired.ts';
import { configDirReader } from '../sources/config-dir.ts';
import { withDocuments } from '../sources/source.ts';
import { documentPath, readDocumentsFile } from './documents-file.ts';
import { socketOption } from './query.ts';
import { callDaemon } from '../protocol/client.ts';
import { parseDocument } from '../protocol/validate.ts';

export function applyCommand(): Command {
  return socketOption(
    new Command('apply')
      .description('standalone: put Network and PodNetworkConfig documents where the daemon follows them')
      .requiredOption('-f, --filename <file>', 'a YAML or JSON file of documents, - for stdin')
      .option('--config-dir <dir>', 'the folder the daemon follows', defaultConfigDir),
  ).action(async (options: { filename: string; configDir: string; socket: string }) => {
    const documents = readDocumentsFile(options.filename);
    ensurePrivateDir(options.configDir);
    // Judged as the daemon will judge them, beside the documents the folder holds already: a
    // document the daemon would refuse whole is not written, and nothing of the file is. Whether
    // eth0's MAC or VRF may change is the daemon's flag, which this does not know: it tells that.
    const names = new Set(documents.map(documentName));
    const limits = { ...defaultLimits, primaryMac: true, primaryVrf: true };
    const problems = documentProblems(withDocuments(configDirReader(options.configDir)(), documents), undefined, limits).filter((p) => names.has(p.document));
    if (problems.length > 0) {
      const lines = problems.map((p) => `  ${p.document} ${p.field}: ${p.reason}`);
      throw new PodnetError('INVALID_REQUEST', `nothing applied; the daemon would refuse these in ${options.filename}:\n${lines.join('\n')}`);
    }
    for (const doc of documents) {
      writeFileAtomic(documentPath(options.configDir, doc), stringify(doc));
      process.stdout.write(`${documentName(doc)} applied\n`);
    }
    const follower = await followingDaemon(options.socket);
    if (follower !== resolve(options.configDir)) {
      const who = follower === undefined ? `no podnet daemon answers at ${options.socket}` : `the daemon at ${options.socket} follows ${follower}`;
      process.stdout.write(`note: ${who}, not ${resolve(options.configDir)}: the documents wait there until a daemon runs with --config-dir ${options.configDir}\n`);
    }
  });
}

/** The folder the daemon at `socket` follows; undefined when none answers (soon) or it follows none. */
async function followingDaemon(socket: string): Promise<string | undefined> {
  try {
    const body = await callDaemon({ socketPath: socket, method: 'GET', path: routes.status, timeoutMs: 2000 });
    return parseDocument('DaemonStatus', body, 'daemon answer').configDir;
  } catch {
    return undefined;
  }
}
