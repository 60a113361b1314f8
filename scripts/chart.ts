// The Helm chart (charts/podnet) made from the kustomize manifests (daemonset/), so the two installs
// are one source: `npm run generate` writes it, and the check that generated files are current
// (src/protocol/validate.test.ts) fails when it drifts. The manifests are copied as they are, the
// kustomization's label added; the DaemonSet is made a template where the chart's values reach it
// (the image, the runtime's CRI socket, metrics, resources, tolerations, the daemon's limits). With
// its default values the chart renders what `kubectl kustomize daemonset/` does, and with metrics on
// what `kubectl kustomize daemonset-metrics/` does (e2e/helm.test.ts).
import { readFileSync } from 'node:fs';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { podnetVersion } from '../src/version.ts';

const root = new URL('..', import.meta.url).pathname;
const read = (file: string) => readFileSync(`${root}${file}`, 'utf8');
type Obj = Record<string, unknown>;

/** The label the kustomization adds to every object (daemonset/kustomization.yaml `labels`). */
function kustomizeLabels(): Record<string, string> {
  const kustomization = parse(read('daemonset/kustomization.yaml')) as { labels: { pairs: Record<string, string> }[] };
  return Object.assign({}, ...kustomization.labels.map((l) => l.pairs)) as Record<string, string>;
}

/**
 * The documents of a manifest, with the kustomization's labels, as YAML Helm leaves alone (its `{{`
 * escaped). CustomResourceDefinitions are kept at `helm uninstall`: deleting them would delete
 * every tenant's PodNetworkConfigs with them.
 */
function copied(text: string, labels: Record<string, string>, header: string, labelsValue?: string): string {
  const docs = parseAllDocuments(text).map((d) => d.toJS() as Obj).filter((d) => d !== null);
  for (const doc of docs) {
    const metadata = doc['metadata'] as Obj;
    metadata['labels'] = { ...((metadata['labels'] as Record<string, string> | undefined) ?? {}), ...labels };
    if (doc['kind'] === 'CustomResourceDefinition') metadata['annotations'] = { ...((metadata['annotations'] as Record<string, string> | undefined) ?? {}), [keepAtUninstall.key]: keepAtUninstall.value };
  }
  const yaml = docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n').replaceAll('{{', '{{ "{{" }}');
  // More labels from the values, where a Prometheus picks its monitors and rules by label.
  const more = labelsValue === undefined ? yaml : yaml.replace(/^(  labels:\n)/m, `$1{{- with .Values.${labelsValue} }}\n{{- toYaml . | nindent 4 }}\n{{- end }}\n`);
  return `${header}${more}`;
}

/** What tells helm to leave an object at uninstall. */
export const keepAtUninstall = { key: 'helm.sh/resource-policy', value: 'keep' } as const;

/** A value of the DaemonSet replaced by a template; each token is a whole YAML value in the stringified object. */
const token = (name: string) => `@@${name}@@`;

/** A flag with its value when the value is set (0 is a value: it turns a wait off). */
function optional(value: string, flag: string, indent: string): string[] {
  return [`{{- if not (kindIs "invalid" .Values.${value}) }}`, `${indent}- ${flag}`, `${indent}- {{ .Values.${value} | quote }}`, '{{- end }}'];
}

/** The DaemonSet, its values templated. */
function daemonSetTemplate(labels: Record<string, string>): string {
  const ds = parse(read('daemonset/daemonset.yaml')) as Obj & { metadata: Obj; spec: { template: { spec: Obj & { initContainers: Obj[]; containers: Obj[]; volumes: Obj[] } } } };
  ds.metadata['labels'] = { ...(ds.metadata['labels'] as Record<string, string>), ...labels };
  const pod = ds.spec.template.spec;
  pod['tolerations'] = token('TOLERATIONS');
  const [install] = pod.initContainers;
  const [daemon] = pod.containers;
  for (const c of [install!, daemon!]) {
    c['image'] = token('IMAGE');
    c['imagePullPolicy'] = token('PULL_POLICY');
  }
  install!['args'] = token('INSTALL_ARGS');
  install!['resources'] = token('INSTALL_RESOURCES');
  daemon!['args'] = token('DAEMON_ARGS');
  daemon!['env'] = token('DAEMON_ENV');
  daemon!['resources'] = token('DAEMON_RESOURCES');
  daemon!['ports'] = token('DAEMON_PORTS');
  const mounts = daemon!['volumeMounts'] as Obj[];
  mounts.find((m) => m['name'] === 'cri-socket')!['mountPath'] = token('CRI_DIR');
  (pod.volumes.find((v) => v['name'] === 'cri-socket')!['hostPath'] as Obj)['path'] = token('CRI_DIR');
  const base = parse(read('daemonset/daemonset.yaml')) as typeof ds;
  const baseDaemon = base.spec.template.spec.containers[0]!;
  const baseInstall = base.spec.template.spec.initContainers[0]!;
  // The base's arguments, the CRI socket's the value's.
  const daemonArgs = baseDaemon['args'] as string[];
  const criAt = daemonArgs.indexOf('--cri-socket') + 1;
  if (criAt === 0 || criAt >= daemonArgs.length) throw new Error('daemonset/daemonset.yaml: the daemon has no --cri-socket argument for the chart\'s criSocket');
  // --dra is the value's (dra.enabled), not the base's to give always.
  const list = (items: readonly string[], indent: string) =>
    items
      .map((a, i) => (items === daemonArgs && a === '--dra' ? undefined : `${indent}- ${items === daemonArgs && i === criAt ? '{{ .Values.criSocket | quote }}' : JSON.stringify(a)}`))
      .filter((line) => line !== undefined)
      .join('\n');

  const text = filled(stringify(ds, { lineWidth: 0 }), (name, indent, key) => {
    const inner = `${indent}  `;
    switch (name) {
      case 'CRI_DIR':
        return `${indent}${key}: {{ dir .Values.criSocket | quote }}`;
      case 'TOLERATIONS':
        return `{{- with .Values.tolerations }}\n${indent}${key}:\n{{- toYaml . | nindent ${inner.length} }}\n{{- end }}`;
      case 'INSTALL_RESOURCES':
        return `${indent}${key}:\n{{- toYaml .Values.resources.install | nindent ${inner.length} }}`;
      case 'DAEMON_RESOURCES':
        return `${indent}${key}:\n{{- toYaml .Values.resources.daemon | nindent ${inner.length} }}`;
      case 'INSTALL_ARGS':
        return [
          `${indent}${key}:`,
          list(baseInstall['args'] as string[], inner),
          ...optional('firstPassTimeoutMs', '--first-pass-timeout-ms', inner),
        ].join('\n');
      case 'DAEMON_ARGS':
        return [
          `${indent}${key}:`,
          list(daemonArgs, inner),
          ...optional('limits.maxAttachmentsPerPod', '--max-attachments-per-pod', inner),
          ...optional('limits.maxAddressesPerPod', '--max-addresses-per-pod', inner),
          `{{- if .Values.limits.allowPrimaryMac }}`,
          `${inner}- --allow-primary-mac`,
          `{{- end }}`,
          `{{- if .Values.standardNetworkStatus }}`,
          `${inner}- --standard-network-status`,
          `{{- end }}`,
          `{{- if .Values.dra.enabled }}`,
          `${inner}- --dra`,
          `{{- end }}`,
          `{{- if .Values.metrics.enabled }}`,
          `${inner}- --metrics-address`,
          `${inner}- "$(POD_IP):{{ .Values.metrics.port }}"`,
          `{{- end }}`,
        ].join('\n');
      case 'DAEMON_ENV':
        return [
          `${indent}${key}:`,
          stringify(baseDaemon['env']).trimEnd().split('\n').map((l) => `${inner}${l}`).join('\n'),
          `{{- if .Values.metrics.enabled }}`,
          `${inner}- name: POD_IP`,
          `${inner}  valueFrom:`,
          `${inner}    fieldRef:`,
          `${inner}      fieldPath: status.podIP`,
          `{{- end }}`,
          `{{- with .Values.extraEnv }}`,
          `{{- toYaml . | nindent ${inner.length} }}`,
          `{{- end }}`,
        ].join('\n');
      case 'DAEMON_PORTS':
        return [`{{- if .Values.metrics.enabled }}`, `${indent}${key}:`, `${inner}- name: metrics`, `${inner}  containerPort: {{ .Values.metrics.port }}`, `${inner}  protocol: TCP`, `{{- end }}`].join('\n');
      default:
        return undefined;
    }
  });
  // The kubelet's folders only for the DRA driver: the daemon mounts what it needs, and no more.
  const gated = whenItems(text, ['kubelet-plugins-registry', 'kubelet-plugin'], '.Values.dra.enabled');
  return `# Generated by scripts/chart.ts from daemonset/daemonset.yaml: edit that file, then npm run generate.\n${gated}`;
}

/**
 * `text` with each list item named one of `names` (a volume, a mount: `- name: X` and the lines
 * below it) kept only when `condition` holds.
 */
function whenItems(text: string, names: readonly string[], condition: string): string {
  const lines = text.split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const item = /^(\s*)- name: (\S+)$/.exec(lines[i]!);
    if (!item || !names.includes(item[2]!)) {
      out.push(lines[i]!);
      continue;
    }
    const inner = `${item[1]}  `;
    let end = i + 1;
    while (end < lines.length && lines[end]!.startsWith(inner)) end++;
    out.push(`{{- if ${condition} }}`, ...lines.slice(i, end), '{{- end }}');
    i = end - 1;
  }
  return out.join('\n');
}

/**
 * `text` with each line `key: @@NAME@@` replaced by what `fill` makes of it; the image and its
 * pull policy (IMAGE, PULL_POLICY) are filled the same for every container, the daemon's and the
 * controller's. A token `fill` does not know, or not alone on its line, is an error.
 */
function filled(text: string, fill: (name: string, indent: string, key: string) => string | undefined): string {
  return text
    .split('\n')
    .map((line) => {
      const m = /^(\s*)(\S+): "?@@(\w+)@@"?$/.exec(line);
      if (!m) {
        if (line.includes('@@')) throw new Error(`a token not alone on its line: ${line}`);
        return line;
      }
      const [, indent, key, name] = m as unknown as [string, string, string, string];
      if (name === 'IMAGE') return `${indent}${key}: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"`;
      if (name === 'PULL_POLICY') return `${indent}${key}: {{ .Values.image.pullPolicy }}`;
      const made = fill(name, indent, key);
      if (made === undefined) throw new Error(`no template for ${name}`);
      return made;
    })
    .join('\n');
}

/** The controller (daemonset/controller.yaml), its image, environment and host network from the values, left out when it is not enabled. */
function controllerTemplate(labels: Record<string, string>): string {
  const docs = parseAllDocuments(read('daemonset/controller.yaml')).map((d) => d.toJS() as Obj).filter((d) => d !== null);
  for (const doc of docs) {
    const metadata = doc['metadata'] as Obj;
    metadata['labels'] = { ...((metadata['labels'] as Record<string, string> | undefined) ?? {}), ...labels };
  }
  const deployment = docs.find((d) => d['kind'] === 'Deployment') as Obj & { spec: { template: { spec: Obj & { containers: Obj[] } } } };
  const pod = deployment.spec.template.spec;
  const [controller] = pod.containers;
  controller!['image'] = token('IMAGE');
  controller!['imagePullPolicy'] = token('PULL_POLICY');
  controller!['env'] = token('EXTRA_ENV');
  pod['hostNetwork'] = token('HOST_NETWORK');
  const text = filled(docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'), (name, indent, key) => {
    switch (name) {
      case 'EXTRA_ENV':
        return `{{- with .Values.extraEnv }}\n${indent}${key}:\n{{- toYaml . | nindent ${indent.length + 2} }}\n{{- end }}`;
      case 'HOST_NETWORK':
        return `{{- if .Values.controller.hostNetwork }}\n${indent}${key}: true\n{{- end }}`;
      default:
        return undefined;
    }
  });
  return `# Generated by scripts/chart.ts from daemonset/controller.yaml: edit that file, then npm run generate.\n{{- if .Values.controller.enabled }}\n${text}{{- end }}\n`;
}

/** What the chart's values say by default: the kustomize base. */
function valuesYaml(): string {
  const base = parse(read('daemonset/daemonset.yaml')) as { spec: { template: { spec: { tolerations: unknown; initContainers: Obj[]; containers: Obj[] } } } };
  const pod = base.spec.template.spec;
  const [repository] = String(pod.containers[0]!['image']).split(':');
  const daemonArgs = pod.containers[0]!['args'] as string[];
  const cri = daemonArgs[daemonArgs.indexOf('--cri-socket') + 1];
  return `# podnet's chart values. The defaults install what \`kubectl apply -k daemonset/\` does.
image:
  repository: ${repository}
  # Default: the chart's appVersion.
  tag: ""
  pullPolicy: ${String(pod.containers[0]!['imagePullPolicy'])}
# The container runtime's CRI socket, asked for the netns of pods that ran before podnet (CRI-O:
# /run/crio/crio.sock); its folder is mounted read-only.
criSocket: ${cri}
# How long a pod's ADD waits for its first pass (ms; 0: it does not wait); empty: the plugin's default.
firstPassTimeoutMs: null
# What the node's admin bounds per pod; empty: podnet's defaults.
limits:
  maxAttachmentsPerPod: null
  maxAddressesPerPod: null
  allowPrimaryMac: false
# Also write the standard k8s.v1.cni.cncf.io/network-status (refused where Multus runs).
standardNetworkStatus: false
# podnet's DRA driver: Networks as devices the scheduler sees, claims prepared before a pod's
# sandbox, and the DeviceClass podnet (resource.k8s.io/v1: Kubernetes 1.34 and later).
dra:
  enabled: true
# Prometheus metrics on the node's address; podMonitor and alerts need the Prometheus Operator.
metrics:
  enabled: false
  port: 9109
  podMonitor: true
  alerts: true
  # Labels a Prometheus selects its PodMonitors and rules by (kube-prometheus-stack: release: NAME).
  podMonitorLabels: {}
  alertsLabels: {}
# More environment of the daemon's and the controller's containers (a cluster without kube-proxy
# gives them KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT here).
extraEnv: []
# The controller, one per cluster: it removes the status entries of nodes that left the cluster.
# hostNetwork: where pods cannot reach the API server on the cluster's network.
controller:
  enabled: true
  hostNetwork: false
tolerations:
${stringify(pod.tolerations).trimEnd().split('\n').map((l) => `  ${l}`).join('\n')}
resources:
  install:
${stringify(pod.initContainers[0]!['resources']).trimEnd().split('\n').map((l) => `    ${l}`).join('\n')}
  daemon:
${stringify(pod.containers[0]!['resources']).trimEnd().split('\n').map((l) => `    ${l}`).join('\n')}
`;
}

/** What Helm checks the values against before it renders (install, upgrade, template, lint): a wrong type or an empty limit is refused naming the value. */
const valuesSchema = {
  $schema: 'https://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: {
    image: {
      type: 'object',
      properties: { repository: { type: 'string', minLength: 1 }, tag: { type: 'string' }, pullPolicy: { enum: ['Always', 'IfNotPresent', 'Never'] } },
    },
    criSocket: { type: 'string', pattern: '^/[A-Za-z0-9._/-]+$', description: 'an absolute path, such as /run/containerd/containerd.sock' },
    firstPassTimeoutMs: { type: ['integer', 'null'], minimum: 0, maximum: 60000 },
    limits: {
      type: 'object',
      properties: {
        maxAttachmentsPerPod: { type: ['integer', 'null'], minimum: 0, maximum: 1024 },
        maxAddressesPerPod: { type: ['integer', 'null'], minimum: 0, maximum: 4096 },
        allowPrimaryMac: { type: 'boolean' },
      },
    },
    standardNetworkStatus: { type: 'boolean' },
    dra: { type: 'object', properties: { enabled: { type: 'boolean' } } },
    metrics: {
      type: 'object',
      properties: {
        enabled: { type: 'boolean' },
        port: { type: 'integer', minimum: 1, maximum: 65535 },
        podMonitor: { type: 'boolean' },
        alerts: { type: 'boolean' },
        podMonitorLabels: { type: 'object', additionalProperties: { type: 'string' } },
        alertsLabels: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
    extraEnv: { type: 'array', items: { type: 'object', required: ['name'] } },
    controller: { type: 'object', properties: { enabled: { type: 'boolean' }, hostNetwork: { type: 'boolean' } } },
    tolerations: { type: ['array', 'null'] },
    resources: { type: 'object' },
  },
};

/** Every file of charts/podnet, by path from the repository's root. */
export function chartFiles(crds: string): Record<string, string> {
  const labels = kustomizeLabels();
  const copy = (file: string) => copied(file === 'daemonset/crds.yaml' ? crds : read(file), labels, `# Generated by scripts/chart.ts from ${file}: edit that file, then npm run generate.\n`);
  const when = (condition: string, body: string) => `{{- if ${condition} }}\n${body}{{- end }}\n`;
  return {
    'charts/podnet/Chart.yaml': `# Generated by scripts/chart.ts.\napiVersion: v2\nname: podnet\ndescription: Change the network of running pods, for tenants without network privileges\ntype: application\nversion: ${podnetVersion}\nappVersion: "${podnetVersion}"\n`,
    'charts/podnet/values.yaml': valuesYaml(),
    'charts/podnet/values.schema.json': `${JSON.stringify(valuesSchema, null, 2)}\n`,
    'charts/podnet/templates/crds.yaml': copy('daemonset/crds.yaml'),
    'charts/podnet/templates/namespace.yaml': copy('daemonset/namespace.yaml'),
    'charts/podnet/templates/rbac.yaml': copy('daemonset/rbac.yaml'),
    'charts/podnet/templates/admission.yaml': copy('daemonset/admission.yaml'),
    'charts/podnet/templates/permissions.yaml': copy('daemonset/permissions.yaml'),
    'charts/podnet/templates/daemonset.yaml': daemonSetTemplate(labels),
    'charts/podnet/templates/controller.yaml': controllerTemplate(labels),
    'charts/podnet/templates/dra.yaml': when('.Values.dra.enabled', copy('daemonset/dra.yaml')),
    // The metrics overlay's own objects: kustomize labels the base's alone.
    'charts/podnet/templates/podmonitor.yaml': when('and .Values.metrics.enabled .Values.metrics.podMonitor', copied(read('daemonset-metrics/podmonitor.yaml'), {}, '# Generated by scripts/chart.ts from daemonset-metrics/podmonitor.yaml: edit that file, then npm run generate.\n', 'metrics.podMonitorLabels')),
    'charts/podnet/templates/alerts.yaml': when('and .Values.metrics.enabled .Values.metrics.alerts', copied(read('daemonset-metrics/alerts.yaml'), {}, '# Generated by scripts/chart.ts from daemonset-metrics/alerts.yaml: edit that file, then npm run generate.\n', 'metrics.alertsLabels')),
  };
}
