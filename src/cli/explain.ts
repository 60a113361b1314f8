import { Command } from 'commander';
import { PodnetError } from '../errors.ts';
import { routes } from '../protocol/paths.ts';
import type { SandboxList } from '../protocol/validate.ts';
import type { AppliedState, LinkSettings, ResolvedAttachment, ResolvedTuning } from '../model/state.ts';
import { getDocument, outputOption, socketOption } from './query.ts';

type Report = SandboxList['items'][number];

export function explainCommand(): Command {
  return socketOption(new Command('explain').description("show a pod's desired and applied network, what cannot be applied and why, and the last error"))
    .argument('<pod>', 'NAME, NAMESPACE/NAME or a container id prefix')
    .addOption(outputOption(['text', 'json']))
    .action(async (pod: string, options: { socket: string; output: string }) => {
      const list = await getDocument(options.socket, routes.sandboxes, 'SandboxList');
      const found = list.items.filter((r) => r.name === pod || `${r.namespace}/${r.name}` === pod || r.containerId.startsWith(pod));
      if (found.length === 0) throw new PodnetError('NOT_FOUND', `no recorded pod matches "${pod}"`);
      process.stdout.write(options.output === 'json' ? `${JSON.stringify(found, null, 2)}\n` : found.map(explainText).join('\n'));
    });
}

function settingsText(settings: LinkSettings): string {
  return Object.entries(settings).map(([k, v]) => `${k} ${String(v)}`).join(', ');
}

export function explainText(report: Report): string {
  const desired = report.desired as { attachments: ResolvedAttachment[]; tuning: ResolvedTuning[] };
  const applied = report.applied as AppliedState | undefined;
  const lines = [`pod ${report.namespace}/${report.name} (container ${report.containerId.slice(0, 12)}, netns ${report.netns})`, 'desired:'];
  for (const a of desired.attachments) {
    lines.push(`  ${a.interface} on Network ${a.network}: bridge ${a.bridge}, host end ${a.hostIf}, addresses ${a.addresses.join(', ') || 'none'}${a.mtu ? `, mtu ${a.mtu}` : ''}`);
  }
  for (const t of desired.tuning) lines.push(`  ${t.interface}: ${settingsText(t.settings)}`);
  if (desired.attachments.length + desired.tuning.length === 0) lines.push('  nothing');
  lines.push('applied:');
  for (const a of applied?.attachments ?? []) lines.push(`  ${a.interface} on Network ${a.network}: ${a.addresses.join(', ') || 'no address'}`);
  for (const t of applied?.tuning ?? []) lines.push(`  ${t.interface}: tuned; originally ${settingsText(t.original)}`);
  if (!applied || applied.attachments.length + applied.tuning.length === 0) lines.push('  nothing');
  lines.push(`problems:${report.problems.length === 0 ? ' none' : ''}`);
  for (const p of report.problems) lines.push(`  ${p.document} ${p.field}: ${p.reason}`);
  lines.push(`last error: ${report.lastError ?? 'none'}`);
  return `${lines.join('\n')}\n`;
}
