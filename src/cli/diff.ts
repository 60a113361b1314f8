import { Command } from 'commander';
import { callDaemon } from '../protocol/client.ts';
import { routes } from '../protocol/paths.ts';
import { parseDocument, type DiffResponse, type PlannedCommand } from '../protocol/validate.ts';
import { readDocumentsFile } from './documents-file.ts';
import { outputOption, socketOption } from './query.ts';

export function diffCommand(): Command {
  return socketOption(new Command('diff').description('standalone: print the steps the daemon would take if these documents were applied, without taking them'))
    .requiredOption('-f, --filename <file>', 'a YAML or JSON file of documents, - for stdin')
    .addOption(outputOption(['text', 'json']))
    .action(async (options: { filename: string; socket: string; output: string }) => {
      const documents = readDocumentsFile(options.filename);
      const body = await callDaemon({ socketPath: options.socket, method: 'POST', path: routes.diff, body: { documents }, timeoutMs: 30_000 });
      const diff = parseDocument('DiffResponse', body, 'daemon answer');
      process.stdout.write(options.output === 'json' ? `${JSON.stringify(diff, null, 2)}\n` : diffText(diff));
    });
}

/** Per pod: its steps, as the command each runs where (host, or inside the pod), and its problems. */
export function diffText(diff: DiffResponse): string {
  const lines: string[] = [];
  const command = (s: PlannedCommand) => `  ${s.where === 'host' ? 'host' : 'pod '}  ${s.tool === 'ip6' ? 'ip -6' : s.tool} ${s.line}`;
  for (const p of diff.documentProblems) lines.push(`${p.document} ${p.field}: ${p.reason}`);
  if (diff.hostSteps.length > 0) lines.push('host, first:', ...diff.hostSteps.map(command));
  for (const item of diff.items) {
    if (item.steps.length === 0 && item.problems.length === 0) continue;
    lines.push(`pod ${item.namespace}/${item.name} (container ${item.containerId.slice(0, 12)}):`);
    lines.push(...item.steps.map(command));
    for (const p of item.problems) lines.push(`  ! ${p.document} ${p.field}: ${p.reason}`);
  }
  if (lines.length === 0) lines.push('no changes');
  return `${lines.join('\n')}\n`;
}
