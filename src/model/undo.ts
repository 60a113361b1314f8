// What takes a step back, as data: an action and its operands (schemas/state.schema.json, UndoAction),
// and the one function that renders an action into the command that does it. Undo actions are
// journaled and read back after a crash, so the journal can ask for nothing but these actions on
// names its schema admits; never a command line. The command lines the planner builds are spelled
// here too, each once, for the step and for the action that takes a step back alike.
import { releasePortLine, securePortLine } from './port-security.ts';
import type { LinkSettingName, LinkSettings, ResolvedRoute, ResolvedRule } from './state.ts';
import type { Command } from './step.ts';
import type { UndoAction, WireguardPeer } from '../protocol/validate.ts';
import { markingLine } from './marking.ts';
import { guardDelLine, guardLine } from './wireguard-guard.ts';

export type { UndoAction } from '../protocol/validate.ts';

export function linkDelLine(dev: string): string {
  return `link del dev ${dev}`;
}

/** The ip line that makes a VRF device in the pod, up, with its table. */
export function vrfAddLine(name: string, table: number): string {
  return `link add name ${name} up type vrf table ${table}`;
}

/** The ip line that gives a host link podnet made its owner mark (model/host-links.ts). */
export function markLine(dev: string, mark: string): string {
  return `link set dev ${dev} alias ${mark}`;
}

export function addrLine(verb: 'add' | 'replace' | 'del', address: string, dev: string): string {
  return `addr ${verb} ${address} dev ${dev}`;
}

/** The ip line that sets one setting; every value passed the schema (numbers, a MAC, booleans, an interface name). */
export function settingLine(dev: string, setting: LinkSettingName, value: LinkSettings[LinkSettingName]): string {
  switch (setting) {
    case 'mtu':
      return `link set dev ${dev} mtu ${value}`;
    case 'txqueuelen':
      return `link set dev ${dev} txqueuelen ${value}`;
    case 'mac':
      return `link set dev ${dev} address ${value}`;
    case 'up':
      return `link set dev ${dev} ${value ? 'up' : 'down'}`;
    case 'promisc':
      return `link set dev ${dev} promisc ${value ? 'on' : 'off'}`;
    case 'vrf':
      return value ? `link set dev ${dev} master ${value}` : `link set dev ${dev} nomaster`;
  }
}

/** The wg line that claims a WireGuard interface's port alone, before it is guarded and given a key. */
export function wgPortLine(dev: string, listenPort: number): string {
  return `set ${dev} listen-port ${listenPort}`;
}

/**
 * The wg line that gives a WireGuard interface its port, its key (by the file wg reads: the key
 * itself is never in a line) and its peers, and removes the peers it no longer has (`removed`, by
 * public key). Every word passed the schema: keys are base64, addresses and CIDRs have no spaces.
 */
export function wgSetLine(dev: string, privateKeyFile: string, listenPort: number, peers: readonly WireguardPeer[], removed: readonly string[]): string {
  const words = ['set', dev, 'listen-port', String(listenPort), 'private-key', privateKeyFile];
  for (const peer of peers) {
    words.push('peer', peer.publicKey);
    if (peer.endpoint) words.push('endpoint', peer.endpoint.address.includes(':') ? `[${peer.endpoint.address}]:${peer.endpoint.port}` : `${peer.endpoint.address}:${peer.endpoint.port}`);
    // Said always: a keepalive no longer asked is turned off (0), not left as it was.
    words.push('allowed-ips', peer.allowedIPs.join(','), 'persistent-keepalive', String(peer.persistentKeepalive ?? 0));
  }
  for (const key of removed) words.push('peer', key, 'remove');
  return words.join(' ');
}

/** `route add|replace|del` of a route: every part of it has passed the schema and resolution. */
export function routeLine(verb: 'add' | 'replace' | 'del', r: ResolvedRoute): string {
  const words = ['route', verb, r.to];
  if (verb !== 'del') {
    if (r.seg6) words.push('encap', 'seg6', 'mode', r.seg6.mode, 'segs', r.seg6.segments.join(','));
    if (r.via) words.push('via', r.via);
    if (r.dev) words.push('dev', r.dev);
    if (r.src) words.push('src', r.src);
  }
  words.push('table', String(r.table));
  if (r.metric !== undefined) words.push('metric', String(r.metric));
  return words.join(' ');
}

/** `rule add|del`; run by `ip -6` when IPv6 (ruleTool), since a rule may name no address. */
export function ruleLine(verb: 'add' | 'del', r: ResolvedRule): string {
  const words = ['rule', verb, 'priority', String(r.priority)];
  if (r.from) words.push('from', r.from);
  if (r.to) words.push('to', r.to);
  if (r.fwmark !== undefined) words.push('fwmark', String(r.fwmark));
  words.push('table', String(r.table));
  return words.join(' ');
}

export function ruleTool(r: ResolvedRule): 'ip' | 'ip6' {
  return r.family === 6 ? 'ip6' : 'ip';
}

export function sysctlLine(path: string, value: string): string {
  return `${path}=${value}`;
}

/** tbf as the reference bandwidth plugin sets it: rate in bit/s, burst in bytes, 25 ms of queue. */
export function tbfLine(dev: string, rate: number, burstBits: number): string {
  return `qdisc replace dev ${dev} root tbf rate ${rate}bit burst ${Math.ceil(burstBits / 8)} latency 25ms`;
}

export function qdiscDelLine(dev: string, parent: 'root' | 'ingress'): string {
  return `qdisc del dev ${dev} ${parent}`;
}

/** The command that does `action`. */
export function renderUndo(action: UndoAction): Command {
  switch (action.action) {
    case 'link-del':
      return { where: action.where, tool: 'ip', line: linkDelLine(action.dev) };
    case 'addr-del':
      return { where: action.where, tool: 'ip', line: addrLine('del', action.address, action.dev) };
    case 'addr-add':
      return { where: action.where, tool: 'ip', line: addrLine('replace', action.address, action.dev) };
    case 'link-set':
      return { where: action.where, tool: 'ip', line: settingLine(action.dev, action.setting, action.value) };
    case 'route':
      return { where: action.where, tool: 'ip', line: routeLine(action.verb, action.route) };
    case 'rule':
      return { where: action.where, tool: ruleTool(action.rule), line: ruleLine(action.verb, action.rule) };
    case 'sysctl':
      return { where: action.where, tool: 'sysctl', line: sysctlLine(action.path, action.value) };
    case 'tbf':
      return { where: action.where, tool: 'tc', line: tbfLine(action.dev, action.rate, action.burst) };
    case 'qdisc-del':
      return { where: action.where, tool: 'tc', line: qdiscDelLine(action.dev, action.parent) };
    case 'port-release':
      return { where: action.where, tool: 'nft', line: releasePortLine(action.port, action.secured) };
    case 'port-secure':
      return { where: action.where, tool: 'nft', line: securePortLine(action.port, action.secured) };
    case 'marking':
      return { where: action.where, tool: 'nft', line: markingLine(action.entries) };
    case 'wireguard':
      return { where: action.where, tool: 'wg', line: wgSetLine(action.dev, action.privateKeyFile, action.listenPort, action.peers, action.removed) };
    case 'wireguard-guard':
      return { where: action.where, tool: 'nft', line: action.listenPort !== undefined ? guardLine(action.table, action.listenPort, action.remoteRanges ?? []) : guardDelLine(action.table) };
  }
}
