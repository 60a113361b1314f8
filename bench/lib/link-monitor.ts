// A network namespace's links as the kernel tells them, event by event: what the attach benchmarks
// stop their clock on (no polling delay).
import { execa, type ResultPromise } from 'execa';
import { now, onCleanup } from './harness.ts';
import { ipv4Of, isUp, type LinkState } from './podnet.ts';

/**
 * A netns's links as `ip monitor link address` reports them, and waits on them. Each wait
 * resolves with the monotonic time the event that satisfied it reached this process. ip 6.1's
 * monitor prints text (it ignores -json): "3: net1@if4: <BROADCAST,UP,LOWER_UP> mtu ..." for a
 * link, "3: net1    inet 198.19.90.2/24 ..." for an address, "Deleted " before a removal.
 */
export class LinkMonitor {
  private readonly links = new Map<string, LinkState>();
  private waiters: { check: () => boolean; resolve: (at: number) => void }[] = [];
  private readonly proc: ResultPromise;
  /** argv that runs `ip -n <netns>` where the netns name is. */
  private readonly ip: readonly string[];

  /**
   * `netnsName` is a name `ip -n` knows; `inMountNamespace` is an argv prefix that runs ip where
   * that name is (nsenter into a node's mount namespace), none for the machine's own.
   */
  constructor(netnsName: string, inMountNamespace: readonly string[] = []) {
    this.ip = [...inMountNamespace, 'ip', '-n', netnsName];
    const [file, ...args] = [...this.ip, 'monitor', 'link', 'address'];
    this.proc = execa(file!, args, { reject: false, buffer: false, stdin: 'ignore', stderr: 'ignore' });
    onCleanup(`stop ip monitor in ${netnsName}`, () => {
      this.proc.kill('SIGTERM');
      return this.proc.catch(() => undefined);
    });
    let partial = '';
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      const at = now();
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.parse(line);
      this.waiters = this.waiters.filter((w) => (w.check() ? (w.resolve(at), false) : true));
    });
  }

  /**
   * Resolves once the monitor is seen to listen: a change made now (lo's MTU, and back, an event
   * each whether lo is up or not) reaches it. Before a timed request, so that none is missed.
   */
  async listening(): Promise<void> {
    for (const mtu of [65535, 65536]) {
      const seen = this.waitFor(`lo mtu ${mtu}`, () => this.get('lo')?.mtu === mtu, 5000);
      const [file, ...args] = [...this.ip, 'link', 'set', 'lo', 'mtu', String(mtu)];
      await execa(file!, args);
      await seen;
    }
  }

  get(ifname: string): LinkState | undefined {
    return this.links.get(ifname);
  }

  /** Resolves at the first event after which `check` holds. */
  waitFor(what: string, check: () => boolean, timeoutMs = 15_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`ip monitor saw no ${what} within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({
        check,
        resolve: (at) => {
          clearTimeout(timer);
          resolve(at);
        },
      });
    });
  }

  private parse(line: string): void {
    const address = /^(Deleted )?\d+: ([^\s:@]+)\s+(inet6?) (\S+)/.exec(line);
    if (address) {
      const [, deleted, ifname, family, local] = address;
      if (deleted && !this.links.has(ifname!)) return; // the link went first
      const link = this.linkNamed(ifname!);
      const [ip, prefix] = local!.split('/');
      const others = (link.addr_info ?? []).filter((a) => `${a.local}/${a.prefixlen}` !== local);
      link.addr_info = deleted ? others : [...others, { family: family!, local: ip!, prefixlen: Number(prefix) }];
      return;
    }
    const link = /^(Deleted )?\d+: ([^\s:@]+)(?:@[^:\s]+)?: <([^>]*)> mtu (\d+)/.exec(line);
    if (!link) return; // continuation lines (link/ether, valid_lft) and other objects
    const [, deleted, ifname, flags, mtu] = link;
    if (deleted) {
      this.links.delete(ifname!);
      return;
    }
    Object.assign(this.linkNamed(ifname!), { flags: flags!.split(','), mtu: Number(mtu) });
  }

  private linkNamed(ifname: string): LinkState {
    let link = this.links.get(ifname);
    if (!link) this.links.set(ifname, (link = { ifname, flags: [], mtu: 0, addr_info: [] }));
    return link;
  }
}


/** A check that the link is UP with an IPv4 address in the subnet. */
export const attachedIn = (subnet: { prefix: string }) => (l: LinkState | undefined) => isUp(l) && ipv4Of(l).some((a) => a.startsWith(subnet.prefix));
