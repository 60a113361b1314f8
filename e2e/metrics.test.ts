// The daemon's Prometheus metrics as an operator's scraper sees them: a standalone daemon with
// --metrics-address, a Network and a PodNetworkConfig that attach a running pod and then go
// again; the counters and gauges move with what happened on the real kernel.
import t from 'tap';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

/** The value of one sample of the exposition `text`, or undefined when there is none. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

t.test('the metrics count attachments made and removed, passes and their steps, by Network', { skip }, async (t) => {
  // Port 0: the kernel picks a free one, which the daemon's "serving" log line names.
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--metrics-address', '127.0.0.1:0'] });
  await daemon.start();
  const url = /"metrics":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/.exec(daemon.log())?.[1];
  t.ok(url, 'the daemon says where it serves its metrics');
  const scrape = async () => (await fetch(url!)).text();

  const first = await scrape();
  t.match(first, /^podnet_build_info\{version="[^"]+",node="v\d+\.\d+\.\d+"\} 1$/m, 'build info');
  t.equal(sample(first, 'podnet_spool_backlog'), 0);
  t.equal(sample(first, 'podnet_quarantined_files'), 0);

  const network = uniqueName('m');
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'metered');
  const cli = podnetCli(daemon);
  t.equal(
    (await cli.apply('net.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${network} }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  ipam: { ranges: [{ subnet: 198.18.123.0/24 }] }
  namespaceSelector: {}
`)).exitCode,
    0,
  );
  t.equal(
    (await cli.apply('cfg.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: metered, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: metered } }
  attachments: [{ network: ${network}, interface: net1 }]
`)).exitCode,
    0,
  );
  await until('net1 in the pod', async () => linkOf(pod.ns.name, 'net1'));
  // Resyncs and passes on request are counted apart; which of them made the attachment is the clock's.
  const bothKinds = (text: string, metric: string) => (sample(text, `${metric}{resync="false"}`) ?? 0) + (sample(text, `${metric}{resync="true"}`) ?? 0);
  // The attachment is counted once the sandbox committed it, its pass's time and steps once that pass ended.
  const attached = await until('the metrics show it, and the pass that made it', async () => {
    const text = await scrape();
    return sample(text, `podnet_attachments{network="${network}",state="ready"}`) === 1 && bothKinds(text, 'podnet_pass_steps_sum') >= 3 ? text : undefined;
  });
  t.equal(sample(attached, `podnet_attachment_changes_total{network="${network}",change="attached"}`), 1, 'one attachment made on the Network');
  t.ok(bothKinds(attached, 'podnet_pass_duration_seconds_count') >= 1, 'passes are timed');
  t.ok(bothKinds(attached, 'podnet_pass_steps_sum') >= 3, 'and their steps counted');

  t.equal((await cli.delete('cfg.yaml')).exitCode, 0);
  const detached = await until('the metrics show it removed', async () => {
    const text = await scrape();
    return sample(text, `podnet_attachment_changes_total{network="${network}",change="detached"}`) === 1 ? text : undefined;
  });
  t.equal(sample(detached, `podnet_attachments{network="${network}",state="ready"}`), undefined, 'no attachment is left on the Network');
  t.equal(await linkOf(pod.ns.name, 'net1'), undefined, 'as the pod shows');
});
