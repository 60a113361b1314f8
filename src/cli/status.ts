import { Command } from 'commander';
import { callDaemon } from '../protocol/client.ts';
import { routes } from '../protocol/paths.ts';
import type { DaemonStatus } from '../protocol/validate.ts';
import { getDocument, outputOption, socketOption } from './query.ts';

export function statusCommand(): Command {
  return socketOption(new Command('status').description('show the node daemon: version, attachments, bridge ports (secured, open, and any the port security table does not filter), spool backlog, files set aside as corrupt'))
    .addOption(outputOption(['text', 'json']))
    .option('--ready', "only ask whether the daemon is ready (its readiness probe): exit 0 when it is, else 1 with the reason")
    .action(async (options: { socket: string; output: string; ready?: boolean }) => {
      if (options.ready) {
        // A PodnetError (not running, not ready and why) reaches cliMain, which prints it and exits 1.
        await callDaemon({ socketPath: options.socket, method: 'GET', path: routes.readyz, timeoutMs: 5000 });
        process.stdout.write('ready\n');
        return;
      }
      const status = await getDocument(options.socket, routes.status, 'DaemonStatus');
      process.stdout.write(options.output === 'json' ? `${JSON.stringify(status, null, 2)}\n` : statusText(status));
    });
}

export function statusText(status: DaemonStatus): string {
  const lines = [
    `version:       ${status.version}`,
    `attachments:   ${status.attachments}`,
    `spool pending: ${status.spoolPending}`,
    ...(status.ports ? [`bridge ports:  ${status.ports.secured} secured, ${status.ports.open} with port security off`] : []),
    ...(status.ports?.unverified ? [`  ${status.ports.unverified} of the secured not filtered as far as podnet can tell: its port security table could not be read, was not whole or lacked their entries (podnet explain POD says why a pod failed)`] : []),
    `quarantined:   ${status.quarantined.length === 0 ? 'none' : status.quarantined.length}`,
    ...status.quarantined.map((q) => `  ${q.file}: ${q.reason}`),
  ];
  return `${lines.join('\n')}\n`;
}
