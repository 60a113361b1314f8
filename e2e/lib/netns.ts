// Network namespaces and host links a test makes, removed again when the test ends, pass or fail.
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';

export function uniqueName(prefix: string): string {
  return `${prefix}${randomBytes(3).toString('hex')}`;
}

/** What acts on a test's links and netns (a daemon, its plugins, a node), stopped before any of them is removed. */
const actors = new WeakMap<object, (() => Promise<void>)[]>();

/**
 * Registers how to stop something that acts on the test's links and netns. tap runs teardowns
 * last registered first, so a daemon made before its test's links would still run while they
 * go, and could make one again after (a bridge plugin's ADD makes its bridge): each removal
 * below stops them first, whatever the order, pass or fail.
 */
export function stopBeforeCleanup(t: object, stop: () => Promise<void>): void {
  actors.set(t, [...(actors.get(t) ?? []), stop]);
}

async function stopActors(t: Test): Promise<void> {
  await Promise.all((actors.get(t) ?? []).map((stop) => stop()));
}

/** A named netns (/run/netns/NAME), deleted at teardown. */
export async function makeNetns(t: Test, prefix = 'pne2e-'): Promise<{ name: string; path: string }> {
  const name = uniqueName(prefix);
  await execa('ip', ['netns', 'add', name]);
  t.teardown(async () => {
    await stopActors(t);
    await execa('ip', ['netns', 'del', name], { reject: false });
  });
  return { name, path: `/run/netns/${name}` };
}

/** Removes a host link at teardown if something (a plugin) left it. */
export function removeLinkAtTeardown(t: Test, name: string): void {
  t.teardown(async () => {
    await stopActors(t);
    await execa('ip', ['link', 'del', name], { reject: false });
  });
}

export interface AddressInfo {
  ifname: string;
  addresses: string[];
}

/** The interfaces of a netns with their addresses, as `ip -json addr` reports them. */
export async function addressesIn(netnsName: string): Promise<AddressInfo[]> {
  const { stdout } = await execa('ip', ['-n', netnsName, '-json', 'addr', 'show']);
  const links = JSON.parse(stdout) as { ifname: string; addr_info: { local: string; prefixlen: number }[] }[];
  return links.map((l) => ({ ifname: l.ifname, addresses: l.addr_info.map((a) => `${a.local}/${a.prefixlen}`) }));
}

export async function linkExists(name: string): Promise<boolean> {
  return (await execa('ip', ['link', 'show', 'dev', name], { reject: false })).exitCode === 0;
}
