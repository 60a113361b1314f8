import { Command } from 'commander';
import { PodnetError } from '../errors.ts';
import { routes } from '../protocol/paths.ts';
import type { SandboxList } from '../protocol/validate.ts';
import type { AppliedState, Resolved, ResolvedRoute, ResolvedRule, ResolvedVrf } from '../model/state.ts';
import { getDocument, outputOption, socketOption } from './query.ts';
import { resultFor } from '../model/cni-config.ts';
import { describeLink, networkKinds } from '../model/kinds/index.ts';
import type { DelegatedRecord } from '../delegate/store.ts';

type Report = SandboxList['items'][number];

export function explainCommand(): Command {
  return socketOption(new Command('explain').description("show a pod's desired and applied network, what cannot be applied and why, and the last error"))
    .argument('<pod>', 'NAME, NAMESPACE/NAME or a container id prefix')
    .addOption(outputOption(['text', 'json']))
    .action(async (pod: string, options: { socket: string; output: string }) => {
      const list = await getDocument(options.socket, routes.sandboxes, 'SandboxList');
      const found = list.items.filter((r) => r.name === pod || `${r.namespace}/${r.name}` === pod || r.containerId.startsWith(pod));
      if (found.length === 0) throw new PodnetError('NOT_FOUND', `no recorded pod matches "${pod}"`);
      if (options.output === 'json') return void process.stdout.write(`${JSON.stringify(found, null, 2)}\n`);
      process.stdout.write(found.map(explainText).join('\n'));
      // A document no pod gets anything from (a file that is not one, a schema it fails) is no pod's problem: told once, after them.
      if (list.documentProblems.length > 0) {
        const lines = ['documents podnet cannot use, for any pod:', ...list.documentProblems.map((p) => `  ${p.document} ${p.field}: ${p.reason}`)];
        process.stdout.write(`\n${lines.join('\n')}\n`);
      }
    });
}

function settingsText(settings: object): string {
  // A VRF of "" is none: the interface was in no VRF.
  return Object.entries(settings).map(([k, v]) => `${k} ${v === '' ? 'none' : String(v)}`).join(', ');
}

function routeText(r: ResolvedRoute): string {
  return `route ${r.to}${r.via ? ` via ${r.via}` : ''}${r.dev ? ` dev ${r.dev}` : ''}${r.seg6 ? ` seg6 ${r.seg6.mode} ${r.seg6.segments.join(',')}` : ''} table ${r.table}${r.metric !== undefined ? ` metric ${r.metric}` : ''}`;
}

function ruleText(r: ResolvedRule): string {
  return `rule IPv${r.family} priority ${r.priority}${r.from ? ` from ${r.from}` : ''}${r.to ? ` to ${r.to}` : ''}${r.fwmark !== undefined ? ` fwmark ${r.fwmark}` : ''} table ${r.table}`;
}

function vrfText(v: ResolvedVrf): string {
  return `vrf ${v.name}, table ${v.table}`;
}

export function explainText(report: Report): string {
  const desired = report.desired as Resolved;
  const applied = report.applied as AppliedState | undefined;
  const lines = [`pod ${report.namespace}/${report.name} (container ${report.containerId.slice(0, 12)}, netns ${report.netns})`, 'desired:'];
  const before = lines.length;
  for (const a of desired.attachments) {
    const link = describeLink(a.link);
    const host = link.hostEnd ? `, host end ${a.hostIf}` : '';
    const rate = a.bandwidth ? `, bandwidth ${settingsText(a.bandwidth)}` : '';
    const dscp = a.dscp !== undefined ? `, dscp ${a.dscp}` : '';
    const peers = a.wireguard ? `, peers ${a.wireguard.peers.map((p) => `${p.publicKey}${p.endpoint ? ` at ${p.endpoint.address} port ${p.endpoint.port}` : ''} for ${p.allowedIPs.join(' ')}`).join('; ') || 'none'}` : '';
    lines.push(`  ${a.interface} on Network ${a.network}: ${link.text}${host}, addresses ${a.addresses.join(', ') || 'none'}${a.mtu ? `, mtu ${a.mtu}` : ''}${rate}${dscp}${peers}`);
  }
  // Delegated attachments are the cni kind's (model/state.ts ResolvedDelegated).
  for (const d of desired.delegated ?? []) lines.push(`  ${d.interface} on Network ${d.network}: ${networkKinds.cni.describe(d.config)}${d.dscp !== undefined ? `, dscp ${d.dscp}` : ''}`);
  for (const v of desired.vrfs ?? []) lines.push(`  ${vrfText(v)}`);
  for (const t of desired.tuning) lines.push(`  ${t.interface}: ${settingsText(t.settings)}`);
  for (const r of desired.routes) lines.push(`  ${routeText(r)}`);
  for (const r of desired.rules) lines.push(`  ${ruleText(r)}`);
  for (const s of desired.sysctls) lines.push(`  sysctl ${s.name} = ${s.value}`);
  if (lines.length === before) lines.push('  nothing');
  lines.push('applied:');
  const appliedFrom = lines.length;
  for (const a of applied?.attachments ?? []) {
    const port = a.portSecurity ? `, port admits only ${a.portSecurity.mac} with its addresses` : a.hostIf ? ', port security off' : '';
    const key = a.wireguard ? `, public key ${a.wireguard.publicKey}` : '';
    lines.push(`  ${a.interface} on Network ${a.network}: ${a.addresses.join(', ') || 'no address'}${port}${a.bandwidth ? `, bandwidth ${settingsText(a.bandwidth)}` : ''}${key}`);
  }
  for (const d of (report.delegated ?? []) as DelegatedRecord[]) {
    const given = resultFor(d.result, d.interface);
    lines.push(`  ${d.interface} on Network ${d.network} (${networkKinds.cni.describe(d.config)}): ${given.ips.join(', ') || 'no address'}${given.mac ? `, mac ${given.mac}` : ''}`);
  }
  for (const v of applied?.vrfs ?? []) lines.push(`  ${vrfText(v)}`);
  for (const t of applied?.tuning ?? []) {
    const dropped = t.dropped?.length ? `; ${t.dropped.length} route(s) of the main table to put back as it leaves its VRF` : '';
    lines.push(`  ${t.interface}: tuned; originally ${settingsText(t.original)}${dropped}`);
  }
  for (const r of applied?.routes ?? []) lines.push(`  ${routeText(r)}`);
  for (const r of applied?.rules ?? []) lines.push(`  ${ruleText(r)}`);
  for (const s of applied?.sysctls ?? []) lines.push(`  sysctl ${s.path.replaceAll('/', '.')} = ${s.value}; originally ${s.original}`);
  if (lines.length === appliedFrom) lines.push('  nothing');
  lines.push(`problems:${report.problems.length === 0 ? ' none' : ''}`);
  for (const p of report.problems) lines.push(`  ${p.document} ${p.field}: ${p.reason}`);
  lines.push(`last error: ${report.lastError ?? 'none'}`);
  return `${lines.join('\n')}\n`;
}
