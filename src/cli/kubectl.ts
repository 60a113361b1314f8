// `kubectl podnet`: the tenant's view of its pods' podnet networks, from the API alone (kubectl runs
// the executable when it is on PATH as kubectl-podnet; `podnet kubectl ...` is the same). It needs
// the caller's kubeconfig and view rights in the namespace, and follows kubectl's conventions:
// -n, --context, --kubeconfig, -o, messages on stderr, exit 1 on an error.
import { Command, Option } from 'commander';
import { stringify } from 'yaml';
import { PodnetError } from '../errors.ts';
import { KubeApi } from '../kube/api.ts';
import { namespaceConfigs, podNetworkView, type EventObject, type NamespaceConfigs } from '../kube/pod-view.ts';
import { mapLimited } from '../daemon/map-limited.ts';
import { paths, type ApiObject, type PodObject } from '../kube/resources.ts';
import type { PodNetworkView, PodNetworkViewList } from '../protocol/validate.ts';
import { formatAge, formatTable } from './format.ts';

interface ClusterOptions {
  namespace?: string;
  context?: string;
  kubeconfig?: string;
  output: string;
}

/** Where the cluster is, as kubectl's flags name it: taken before the subcommand (`kubectl podnet -n x get`) or after it. */
function withConnectionOptions(command: Command): Command {
  return command
    .option('-n, --namespace <namespace>', 'the namespace (default: the context\'s, else default)')
    .option('--context <context>', 'the kubeconfig context to use')
    .option('--kubeconfig <file>', 'the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)');
}

/** The flags every subcommand takes. */
function withClusterOptions(command: Command, outputs: readonly [string, ...string[]]): Command {
  return withConnectionOptions(command).addOption(new Option('-o, --output <format>', 'output format').choices(outputs).default(outputs[0]));
}

/** A subcommand's options with those given before it: what is given after it wins. */
function optionsOf<T extends ClusterOptions>(command: Command): T {
  const given = Object.fromEntries(Object.entries(command.opts()).filter(([, v]) => v !== undefined));
  return { ...command.parent?.opts(), ...given } as T;
}

function connect(options: ClusterOptions): { api: KubeApi; namespace: string } {
  const { api, namespace } = KubeApi.forUser({ kubeconfig: options.kubeconfig, context: options.context });
  return { api, namespace: options.namespace ?? namespace };
}

const list = <T>(api: KubeApi, path: string) => api.get<{ items?: T[] }>(path).then((l) => l.items ?? []);
const podsPath = (namespace: string) => `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
const configsPath = (namespace: string) => `${paths.podNetworkConfigs.replace(/\/podnetworkconfigs$/, '')}/namespaces/${encodeURIComponent(namespace)}/podnetworkconfigs`;

/** The configs of a namespace, read once for its pods; told as not listed when the caller may not (a role without them, a cluster without podnet's CRDs). */
async function configsOf(api: KubeApi, namespace: string): Promise<NamespaceConfigs> {
  try {
    return namespaceConfigs(await list<ApiObject>(api, configsPath(namespace)));
  } catch (err) {
    if (err instanceof PodnetError && err.details === 'Forbidden') return namespaceConfigs({ unlisted: 'you may not list them (Forbidden)' });
    if (err instanceof PodnetError && err.code === 'NOT_FOUND') return namespaceConfigs({ unlisted: "the cluster does not serve them (podnet's CRDs are not installed)" });
    throw err;
  }
}

/** Namespaces whose configs `get -A` reads at once: one request each, through a few connections. */
const namespacesAtOnce = 4;

async function explain(name: string, options: ClusterOptions): Promise<void> {
  const { api, namespace } = connect(options);
  const pod = await api.get<PodObject>(`${podsPath(namespace)}/${encodeURIComponent(name)}`);
  // This pod's, not an earlier pod's of the same name (a StatefulSet's made again).
  const selector = new URLSearchParams({ fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${name},involvedObject.uid=${pod.metadata.uid}` });
  const [configs, events] = await Promise.all([configsOf(api, namespace), list<EventObject>(api, `/api/v1/namespaces/${encodeURIComponent(namespace)}/events?${selector}`)]);
  const view = podNetworkView(pod, configs, events);
  if (options.output === 'json') return void process.stdout.write(`${JSON.stringify(view, null, 2)}\n`);
  if (options.output === 'yaml') return void process.stdout.write(stringify(view));
  process.stdout.write(explainText(view, Date.now()));
}

/** `explain`'s text: kubectl describe's shape, a section for each part. */
export function explainText(view: PodNetworkView, now: number): string {
  const out: string[] = [`Name:       ${view.name}`, `Namespace:  ${view.namespace}`, `Node:       ${view.node ?? '<none>'}`, 'Interfaces:'];
  const indent = (text: string) => text.trimEnd().split('\n').map((l) => `  ${l}`);
  if (view.interfaces.length === 0) out.push('  <none told yet>');
  else {
    const note = (e: PodNetworkView['interfaces'][number]) =>
      e.default ? 'primary' : e.problem !== undefined ? `not made: ${e.problem}` : e.madeAfterStart ? "made after the pod's containers started" : e.publicKey ? `public key ${e.publicKey}` : '';
    const rows = view.interfaces.filter((e) => e.interface !== undefined).map((e) => [e.interface!, e.name, (e.ips ?? []).join(',') || '-', e.mac ?? '-', e.mtu === undefined ? '-' : String(e.mtu), note(e)]);
    out.push(...indent(formatTable(['INTERFACE', 'NETWORK', 'IPS', 'MAC', 'MTU', 'NOTE'], rows)));
  }
  out.push('Asked by:');
  if (view.askedBy.length === 0) out.push('  <nothing asks podnet for an attachment>');
  for (const a of view.askedBy) out.push(`  ${a.document} ${a.field}: ${a.interface ?? 'an interface'} on Network ${a.network}${a.required ? ', required' : ''}`);
  out.push('Configs:');
  if (view.configs.length === 0) out.push('  <none selects the pod>');
  for (const c of view.configs) {
    out.push(`  ${c.name}: Ready ${c.ready}${c.message ? ` (${c.message})` : ''}`);
    for (const also of c.also ?? []) out.push(`    also ${also}`);
  }
  out.push('Problems:');
  if (view.problems.length === 0) out.push('  <none>');
  for (const p of view.problems) out.push(`  ${p.document}${p.field ? ` ${p.field}` : ''}${p.interface ? ` (${p.interface})` : ''}: ${p.reason}`);
  out.push('Events:');
  if (view.events.length === 0) out.push('  <none>');
  else {
    const rows = view.events.map((e) => [e.lastSeen ? formatAge(now - Date.parse(e.lastSeen)) : '-', e.type, e.reason, e.message]);
    out.push(...indent(formatTable(['LAST SEEN', 'TYPE', 'REASON', 'MESSAGE'], rows)));
  }
  return `${out.join('\n')}\n`;
}

async function get(options: ClusterOptions & { allNamespaces?: boolean }): Promise<void> {
  const { api, namespace } = connect(options);
  const pods = await list<PodObject>(api, options.allNamespaces ? '/api/v1/pods' : podsPath(namespace));
  const namespaces = [...new Set(pods.map((p) => p.metadata.namespace))];
  const configs = new Map(await mapLimited(namespaces, namespacesAtOnce, async (ns) => [ns, await configsOf(api, ns)] as const));
  const views: PodNetworkViewList = { items: pods.map((pod) => podNetworkView(pod, configs.get(pod.metadata.namespace)!, [])) };
  if (options.output === 'json') return void process.stdout.write(`${JSON.stringify(views, null, 2)}\n`);
  if (options.output === 'yaml') return void process.stdout.write(stringify(views));
  if (views.items.length === 0) {
    process.stderr.write(options.allNamespaces ? 'No resources found\n' : `No resources found in ${namespace} namespace.\n`);
    return;
  }
  process.stdout.write(getText(views, options.output === 'wide', options.allNamespaces === true));
}

/** `get`'s table: a pod a row, its podnet interfaces in one column (wide: with MAC and MTU, and its node). */
export function getText(views: PodNetworkViewList, wide: boolean, allNamespaces: boolean): string {
  const rows = views.items.map((v) => {
    const own = v.interfaces.filter((e) => !e.default && e.interface !== undefined);
    const made = own.filter((e) => e.problem === undefined);
    const shown = made.map((e) => `${e.interface}=${e.name}${e.ips?.length ? `:${e.ips.join('+')}` : ''}${wide && e.mtu !== undefined ? `/mtu ${e.mtu}` : ''}`).join(',') || '<none>';
    const problems = v.problems.length;
    return [...(allNamespaces ? [v.namespace] : []), v.name, shown, String(v.askedBy.length), String(problems), ...(wide ? [v.node ?? '<none>', v.configs.map((c) => c.name).join(',') || '<none>'] : [])];
  });
  const header = [...(allNamespaces ? ['NAMESPACE'] : []), 'NAME', 'INTERFACES', 'ASKED', 'PROBLEMS', ...(wide ? ['NODE', 'CONFIGS'] : [])];
  return formatTable(header, rows);
}

export function kubectlProgram(name = 'kubectl podnet'): Command {
  const program = withConnectionOptions(new Command(name).description("the podnet networks of your pods, as the API tells them: what each pod has, what asks for it, and what cannot be made and why"));
  program.addCommand(
    withClusterOptions(new Command('explain').description("a pod's podnet interfaces, who asks for them, its configs, problems and Events").argument('<pod>', 'the pod\'s name'), ['text', 'json', 'yaml']).action(
      (pod: string, _options: unknown, command: Command) => explain(pod, optionsOf(command)),
    ),
  );
  program.addCommand(
    withClusterOptions(new Command('get').description("the pods of a namespace with their podnet interfaces").option('-A, --all-namespaces', 'the pods of every namespace'), ['text', 'wide', 'json', 'yaml']).action(
      (_options: unknown, command: Command) => get(optionsOf<ClusterOptions & { allNamespaces?: boolean }>(command)),
    ),
  );
  return program;
}

/** kubectl's way of telling an error: the server's reason and its message when it has one. */
export function kubectlError(err: PodnetError): string {
  if (err.details === undefined || !/^[A-Z][A-Za-z]+$/.test(err.details)) return `error: ${err.message}\n`;
  // KubeApi says "GET /path: 404 message"; kubectl tells the server's message alone.
  const told = /^[A-Z]+ \S+: \d{3} (.*)$/s.exec(err.message)?.[1] ?? err.message;
  return `Error from server (${err.details}): ${told}\n`;
}
