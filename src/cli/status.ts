import { Command } from 'commander';
import { callDaemon } from '../protocol/client.ts';
import { defaultSocketPath, routes } from '../protocol/paths.ts';
import { parseDocument, type DaemonStatus } from '../protocol/validate.ts';

export function statusCommand(): Command {
  return new Command('status')
    .description('show the node daemon: version, attachments, spool backlog, files set aside as corrupt')
    .option('--socket <path>', 'the daemon socket', defaultSocketPath)
    .option('-o, --output <format>', 'text or json', 'text')
    .action(async (options: { socket: string; output: string }) => {
      if (options.output !== 'text' && options.output !== 'json') {
        throw new Error(`--output must be text or json, not "${options.output}"`);
      }
      const body = await callDaemon({ socketPath: options.socket, method: 'GET', path: routes.status, timeoutMs: 10_000 });
      const status = parseDocument('DaemonStatus', body, 'daemon answer');
      process.stdout.write(options.output === 'json' ? `${JSON.stringify(status, null, 2)}\n` : statusText(status));
    });
}

export function statusText(status: DaemonStatus): string {
  const lines = [
    `version:       ${status.version}`,
    `attachments:   ${status.attachments}`,
    `spool pending: ${status.spoolPending}`,
    `quarantined:   ${status.quarantined.length === 0 ? 'none' : status.quarantined.length}`,
    ...status.quarantined.map((q) => `  ${q.file}: ${q.reason}`),
  ];
  return `${lines.join('\n')}\n`;
}
