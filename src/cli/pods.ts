import { Command } from 'commander';
import { routes } from '../protocol/paths.ts';
import type { AttachmentList } from '../protocol/validate.ts';
import { formatAge, formatTable } from './format.ts';
import { getDocument, outputOption, socketOption } from './query.ts';

export function podsCommand(): Command {
  return socketOption(new Command('pods').description('list the pod sandboxes the node daemon has recorded'))
    .addOption(outputOption(['table', 'json']))
    .action(async (options: { socket: string; output: string }) => {
      const list = await getDocument(options.socket, routes.attachments, 'AttachmentList');
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
    // Found in the runtime's result cache at the daemon's start, not recorded by an ADD.
    record.adoptedFrom === undefined ? 'no' : 'yes',
  ]);
  return formatTable(['NAMESPACE', 'NAME', 'CONTAINER', 'IFNAME', 'NETNS', 'AGE', 'NETNS-EXISTS', 'ADOPTED'], rows);
}
