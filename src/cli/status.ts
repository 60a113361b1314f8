import { Command } from 'commander';
import { routes } from '../protocol/paths.ts';
import type { DaemonStatus } from '../protocol/validate.ts';
import { getDocument, outputOption, socketOption } from './query.ts';

export function statusCommand(): Command {
  return socketOption(new Command('status').description('show the node daemon: version, attachments, spool backlog, files set aside as corrupt'))
    .addOption(outputOption(['text', 'json']))
    .action(async (options: { socket: string; output: string }) => {
      const status = await getDocument(options.socket, routes.status, 'DaemonStatus');
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
