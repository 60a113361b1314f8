import { Command } from 'commander';
import { callDaemon } from '../protocol/client.ts';
import { defaultSocketPath, routes } from '../protocol/paths.ts';
import { parseDocument, type AttachmentList } from '../protocol/validate.ts';
import { formatAge, formatTable } from './format.ts';

export function podsCommand(): Command {
  return new Command('pods')
    .description('list the pod sandboxes the node daemon has recorded')
    .option('--socket <path>', 'the daemon socket', defaultSocketPath)
    .option('-o, --output <format>', 'table or json', 'table')
    .action(async (options: { socket: string; output: string }) => {
      if (options.output !== 'table' && options.output !== 'json') {
        throw new Error(`--output must be table or json, not "${options.output}"`);
      }
      const body = await callDaemon({ socketPath: options.socket, method: 'GET', path: routes.attachments, timeoutMs: 10_000 });
      const list = parseDocument('AttachmentList', body, 'daemon answer');
      process.stdout.write(options.output === 'json' ? `${JSON.stringify(list, null, 2)}\n` : podsTable(list, new Date()));
    });
}

export function podsTable(list: AttachmentList, now: Date): string {
  const rows = list.items.map(({ record, netnsExists }) => [
    record.pod.namespace ?? '-',
    record.pod.name ?? '-',
    record.containerId.slice(0, 12),
    record.ifname,
    record.netns,
    formatAge(now.getTime() - Date.parse(record.createdAt)),
    netnsExists ? 'yes' : 'no',
  ]);
  return formatTable(['NAMESPACE', 'NAME', 'CONTAINER', 'IFNAME', 'NETNS', 'AGE', 'NETNS-EXISTS'], rows);
}
