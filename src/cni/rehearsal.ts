// A runtime's VERSION and a pod's ADD and DEL, played through the plugin's own code at build time
// (docs/adr/0025). V8
// compiles a function on its first call, and the code cache of a script compiled but not run holds
// its top level alone: each ADD then compiled its config's validator, its record's, the spool's
// writer, on every pod's creation. The build runs this rehearsal and then takes the cache
// (scripts/code-cache.ts), so the executable starts with what an ADD calls already compiled.
import { runPlugin, type PluginContext } from './plugin.ts';
import { spoolRecorder } from './recorder.ts';

/** The netns the rehearsal names: no such file is opened; the probe is told it is a pod's. */
const rehearsalNetns = '/var/run/netns/podnet-rehearsal';

/**
 * A VERSION, an ADD and a DEL as a runtime sends them, recorded in `stateDir` (the caller's, and
 * empty). Throws when one fails. Not rehearsed: reading stdin and probing a real netns (a few small
 * functions, compiled at their first call), and CHECK, GC and STATUS, which no pod's creation runs.
 */
export async function rehearsePlugin(stateDir: string): Promise<void> {
  const prevResult = {
    cniVersion: '1.1.0',
    interfaces: [{ name: 'eth0', mac: '0a:58:c6:12:46:02', sandbox: rehearsalNetns }],
    ips: [{ address: '198.18.70.2/24', gateway: '198.18.70.1', interface: 0 }],
    routes: [{ dst: '0.0.0.0/0' }],
    dns: {},
  };
  // The ADD asks the daemon for its first pass, as a pod's that asks something does: this socket
  // cannot be (/dev/null is no folder), so a build on a node never reaches the node's daemon, and
  // the ADD goes on as without a daemon (its record marked as started without its network).
  const config = { cniVersion: '1.1.0', name: 'rehearsal', type: 'podnet', stateDir, socketPath: '/dev/null/podnet-rehearsal.sock', prevResult };
  const context = (command: string): PluginContext => ({
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'podnet-rehearsal',
      CNI_NETNS: rehearsalNetns,
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=rehearsal;K8S_POD_NAME=rehearsal-0;K8S_POD_UID=0f1e2d3c',
      CNI_PATH: '/opt/cni/bin',
    },
    stdin: JSON.stringify(config),
    openRecorder: spoolRecorder,
    isNetworkNamespace: (path) => path === rehearsalNetns,
    isNodeNetworkNamespace: () => false,
    netnsIdentity: () => undefined,
    now: () => new Date(),
  });
  for (const command of ['VERSION', 'ADD', 'DEL']) {
    const out = await runPlugin(context(command));
    // A rehearsal that takes the error path would cache that path instead: the build stops.
    if (out.exitCode !== 0) throw new Error(`the plugin's rehearsed ${command} failed: ${out.stdout}`);
  }
}
