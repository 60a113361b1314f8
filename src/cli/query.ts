// What every command that asks the daemon shares: the --socket option and a typed GET.
import { Option, type Command } from 'commander';
import { callDaemon } from '../protocol/client.ts';
import { defaultSocketPath } from '../protocol/paths.ts';
import { parseDocument, type DocumentName, type DocumentTypes } from '../protocol/validate.ts';

export function socketOption(command: Command): Command {
  return command.option('--socket <path>', 'the daemon socket', defaultSocketPath);
}

export function outputOption(formats: readonly [string, ...string[]]): Option {
  return new Option('-o, --output <format>', 'output format').choices(formats).default(formats[0]);
}

/** GETs `path` and checks the answer against its document's schema. */
export async function getDocument<N extends DocumentName>(socketPath: string, path: string, name: N): Promise<DocumentTypes[N]> {
  const body = await callDaemon({ socketPath, method: 'GET', path, timeoutMs: 10_000 });
  return parseDocument(name, body, 'daemon answer');
}
