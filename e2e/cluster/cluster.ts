// A real control plane for e2e tests: etcd and kube-apiserver on 127.0.0.1, with static-token
// users so RBAC decides for real. There is no controller-manager, scheduler or kubelet: a test
// binds pods to a node name itself and plays the runtime's part.
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1ClusterRole, type V1LabelSelector, type V1PolicyRule } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { stringify } from 'yaml';
import { cachedClusterBinaries, dieWithParent, ensureClusterBinaries, findGo, type ClusterBinaries } from './binaries.ts';

/**
 * The static-token users: admin is in system:masters, the tenants only in system:authenticated,
 * node is the kubelet of the node named nodeName and node-2 that of secondNodeName (system:nodes,
 * which the Node authorizer holds to its own node's objects).
 */
export const clusterUsers = ['admin', 'tenant-a', 'tenant-b', 'node', 'node-2'] as const;
export type ClusterUser = (typeof clusterUsers)[number];

/**
 * The one node a real kubelet registers (e2e/cluster/node.ts): with --hostname-override it is
 * also the node's InternalIP, the address the apiserver reaches the kubelet at.
 */
export const nodeName = '127.0.0.1';

/**
 * The second node (startNode's `second`), in a network namespace of its own: the apiserver
 * reaches its kubelet at its underlay address, its InternalIP.
 */
export const secondNodeName = 'podnet-e2e-node-2';

/** How each user's token line names it: token,user,uid[,"group,group"]. */
const tokenUser: Record<ClusterUser, { name: string; groups?: string }> = {
  admin: { name: 'admin', groups: 'system:masters' },
  'tenant-a': { name: 'tenant-a' },
  'tenant-b': { name: 'tenant-b' },
  node: { name: `system:node:${nodeName}`, groups: 'system:nodes' },
  'node-2': { name: `system:node:${secondNodeName}`, groups: 'system:nodes' },
};

/**
 * What a cluster (or node) needs of whoever starts it: where to register its teardown, and whether
 * things went well (its logs are printed when not). A tap Test is one; a benchmark makes its own.
 */
export interface Owner {
  teardown(fn: () => unknown): void;
  passing(): boolean;
}

export interface ClusterOptions {
  /**
   * For a real node (e2e/cluster/node.ts): ServiceAccount admission on (pods get their token;
   * kube-controller-manager makes each namespace's default account) and the kubelet reached at
   * the node's InternalIP.
   */
  forNode?: boolean;
}

/** Where Service IPs come from: addresses of the benchmark range no test network uses. */
export const serviceClusterIpRange = '198.19.240.0/24';

export interface Cluster {
  /** https://127.0.0.1:<port> */
  server: string;
  /** PEM of the CA that signed the apiserver's serving certificate. */
  caData: string;
  caFile: string;
  /** The cluster's data folder, removed at the test's teardown. */
  root: string;
  /** The service-account signing key, PEM, for kube-controller-manager's token controller. */
  serviceAccountKeyFile: string;
  /** A kubeconfig file for a static-token user (server, CA and token inline). */
  kubeconfig(user: ClusterUser): string;
  /** That user's bearer token, for plain HTTPS requests. */
  token(user: ClusterUser): string;
  /**
   * A kubeconfig file for a service account, the way the daemon runs in a real cluster: the
   * account (and its namespace) are made when missing, and its token comes from TokenRequest.
   */
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
  /**
   * Fills every ClusterRole that has an aggregationRule (admin, edit, view, ...) with the rules of
   * the ClusterRoles its selectors match, once: the part of kube-controller-manager that RBAC
   * needs. Without it admin, edit and view grant nothing here. Call it after making the roles;
   * like any RBAC change it takes effect a moment later (the apiserver's informers), so poll.
   */
  aggregateClusterRoles(): Promise<void>;
  /** Stops kube-apiserver (SIGTERM, SIGKILL 3 s later) and starts it again on the same port, etcd untouched. */
  restartApiserver(): Promise<void>;
  /**
   * Restarts kube-apiserver with etcd moved on and compacted while it is down: the resourceVersion
   * every client's watch holds is then older than anything the new apiserver serves, so the next
   * watch gets 410 Gone and the client has to list again (what a long outage does).
   */
  expireWatches(): Promise<void>;
  /** Kills both processes; the test's teardown does it too, and removes the data. */
  stop(): Promise<void>;
}

export interface Supervised {
  name: string;
  pid: number;
  logFile: string;
  /** Settles when the process has exited, with how. */
  exited: Promise<string>;
  /** Undefined while it runs. */
  exit(): string | undefined;
}

/** How long a test file may take when it starts with a cold build of the binaries. */
export const coldBuildTimeoutMs = 45 * 60_000;

/**
 * For a test file's top, with its root t: why the file must skip, or undefined; and when the
 * binaries still have to be built, more time than the runner's default for the whole file.
 */
export async function prepareClusterTest(root: Test): Promise<string | undefined> {
  const skip = await missingClusterPrerequisite();
  if (!skip && !(await cachedClusterBinaries())) root.setTimeout(coldBuildTimeoutMs);
  return skip;
}

/**
 * Why this machine cannot run a cluster test, or undefined when it can. Under CI a missing Go is
 * a failure, not a skip: CI machines have Go.
 */
export async function missingClusterPrerequisite(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (the binaries are cached in a system folder)';
  if ((await cachedClusterBinaries()) || findGo()) return undefined;
  if (process.env['CI']) throw new Error('CI machine has no go command to build kube-apiserver and etcd with');
  return 'needs Go to build kube-apiserver and etcd (none cached)';
}

/** Starts a fresh cluster (binaries built first when not cached) and stops it at t's teardown. */
export async function startCluster(t: Owner, options: ClusterOptions = {}): Promise<Cluster> {
  const binaries = await ensureClusterBinaries();
  await sweepCrashedClusters();
  const root = await mkdtemp(join(tmpdir(), dataPrefix));
  await writeFile(join(root, 'owner'), String(process.pid));
  const processes: Supervised[] = [];
  let apiserver: Supervised | undefined;

  const stop = async () => {
    const running = processes.splice(0);
    apiserver = undefined;
    await Promise.all(running.map((p) => terminate(p, 'SIGKILL', 0)));
  };
  t.teardown(async () => {
    await stop();
    if (!t.passing()) await dumpLogs(root);
    await rm(root, { recursive: true, force: true });
  });

  const files = await writeIdentity(root);
  const etcd = await startEtcd(binaries, root);
  processes.push(etcd.process);

  const securePort = await freePort();
  const server = `https://127.0.0.1:${securePort}`;
  const launchApiserver = async () => {
    const started = launch('kube-apiserver', binaries.kubeApiserver, apiserverArgs(root, files, etcd.url, securePort, options), join(root, 'kube-apiserver.log'));
    processes.push(started);
    apiserver = started;
    await waitApiserverReady(started, root, server, files.tokens.admin);
  };
  await launchApiserver();
  const restartApiserver = async (whileDown?: () => Promise<void>) => {
    const old = apiserver;
    if (!old) throw new Error('the cluster is stopped');
    // An open watch holds a graceful shutdown until its client gives up on it (client-node: 30 s
    // without a byte), which would only make the test slow: after a moment it is an outage.
    await terminate(old, 'SIGTERM', 3000);
    const index = processes.indexOf(old);
    if (index < 0) throw new Error('the cluster was stopped during the restart');
    processes.splice(index, 1);
    await whileDown?.();
    await launchApiserver();
  };

  const caData = await apiserverCa(root);
  const caFile = join(root, 'ca.crt');
  await writeFile(caFile, caData);
  const kubeconfigs = new Map<ClusterUser, string>();
  for (const user of clusterUsers) {
    const path = join(root, `kubeconfig-${user}.yaml`);
    await writeFile(path, kubeconfigText(server, caData, user, files.tokens[user]));
    kubeconfigs.set(user, path);
  }

  const admin = new KubeConfig();
  admin.loadFromFile(kubeconfigs.get('admin')!);

  return {
    server,
    caData,
    caFile,
    root,
    serviceAccountKeyFile: files.saKey,
    kubeconfig: (user) => kubeconfigs.get(user)!,
    aggregateClusterRoles: () => aggregateClusterRoles(admin.makeApiClient(RbacAuthorizationV1Api)),
    token: (user) => files.tokens[user],
    async serviceAccountKubeconfig(namespace, name) {
      const core = admin.makeApiClient(CoreV1Api);
      await ignoreConflict(core.createNamespace({ body: { metadata: { name: namespace } } }));
      await ignoreConflict(core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }));
      const answer = await core.createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } } });
      const token = answer.status?.token;
      if (!token) throw new Error(`TokenRequest for ${namespace}/${name} gave no token`);
      const path = join(root, `kubeconfig-sa-${namespace}-${name}.yaml`);
      await writeFile(path, kubeconfigText(server, caData, `system:serviceaccount:${namespace}:${name}`, token));
      return path;
    },
    restartApiserver: () => restartApiserver(),
    expireWatches: () => restartApiserver(() => moveEtcdOn(etcd.url)),
    stop,
  };
}

const dataPrefix = 'podnet-cluster-';

/**
 * A test process that died without its teardown had its etcd and apiserver killed by the kernel
 * (setpriv) but left its data folder: remove those whose owner is gone.
 */
async function sweepCrashedClusters(): Promise<void> {
  for (const folder of await ownedTempFolders(dataPrefix)) if (!folder.alive) await rm(folder.path, { recursive: true, force: true });
}

/**
 * The temp folders named `prefix...` that hold an `owner` file (the pid of the test process that
 * made them), and whether that owner still runs. A folder without one is being made, or not ours.
 */
export async function ownedTempFolders(prefix: string): Promise<{ path: string; owner: number; alive: boolean }[]> {
  const folders = [];
  for (const name of (await readdir(tmpdir()).catch(() => [])).filter((n) => n.startsWith(prefix))) {
    const path = join(tmpdir(), name);
    const owner = Number(await readFile(join(path, 'owner'), 'utf8').catch(() => ''));
    if (owner) folders.push({ path, owner, alive: isAlive(owner) });
  }
  return folders;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** What the clusterrole-aggregation controller does, in one pass. */
async function aggregateClusterRoles(rbac: RbacAuthorizationV1Api): Promise<void> {
  const roles = (await rbac.listClusterRole()).items.sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  for (const role of roles) {
    const selectors = role.aggregationRule?.clusterRoleSelectors;
    if (!selectors) continue;
    const rules: V1PolicyRule[] = [];
    for (const selector of selectors) {
      for (const source of roles) {
        if (source === role || !selects(selector, source)) continue;
        for (const rule of source.rules ?? []) if (!rules.some((r) => sameRule(r, rule))) rules.push(rule);
      }
    }
    if (sameRules(role.rules ?? [], rules)) continue;
    await rbac.replaceClusterRole({ name: role.metadata!.name!, body: { ...role, rules } });
  }
}

function selects(selector: V1LabelSelector, role: V1ClusterRole): boolean {
  const labels = role.metadata?.labels ?? {};
  const byLabel = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    byLabel &&
    (selector.matchExpressions ?? []).every((e) => {
      const has = e.key in labels;
      switch (e.operator) {
        case 'In':
          return has && (e.values ?? []).includes(labels[e.key]!);
        case 'NotIn':
          return !has || !(e.values ?? []).includes(labels[e.key]!);
        case 'Exists':
          return has;
        case 'DoesNotExist':
          return !has;
        default:
          throw new Error(`label selector operator ${e.operator} is not one Kubernetes knows`);
      }
    })
  );
}

const sameRule = (a: V1PolicyRule, b: V1PolicyRule) => JSON.stringify(a) === JSON.stringify(b);
const sameRules = (a: V1PolicyRule[], b: V1PolicyRule[]) => a.length === b.length && a.every((r, i) => sameRule(r, b[i]!));

interface Identity {
  tokens: Record<ClusterUser, string>;
  tokenFile: string;
  saKey: string;
  saPub: string;
}

/** The users' tokens and the service-account signing key, fresh for every cluster. */
async function writeIdentity(root: string): Promise<Identity> {
  const tokens = Object.fromEntries(clusterUsers.map((u) => [u, randomBytes(24).toString('hex')])) as Record<ClusterUser, string>;
  // The apiserver adds system:authenticated itself.
  const lines = clusterUsers.map((u) => {
    const { name, groups } = tokenUser[u];
    return groups ? `${tokens[u]},${name},${u},"${groups}"` : `${tokens[u]},${name},${u}`;
  });
  const tokenFile = join(root, 'tokens.csv');
  await writeFile(tokenFile, `${lines.join('\n')}\n`, { mode: 0o600 });
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const saKey = join(root, 'sa.key');
  const saPub = join(root, 'sa.pub');
  await writeFile(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(saPub, publicKey.export({ type: 'spki', format: 'pem' }));
  return { tokens, tokenFile, saKey, saPub };
}

async function startEtcd(binaries: ClusterBinaries, root: string): Promise<{ process: Supervised; url: string }> {
  const dataDir = join(root, 'etcd');
  await mkdir(dataDir, { mode: 0o700 });
  // Ports are picked free and then bound by etcd: another process may win the race, so try again.
  for (let attempt = 1; ; attempt++) {
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const url = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const etcd = launch(
      'etcd',
      binaries.etcd,
      [
        '--name=podnet-e2e',
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=podnet-e2e=${peer}`,
        '--log-level=warn',
        // Test data on a shared disk: an fsync per write would only make the apiserver slow.
        '--unsafe-no-fsync',
      ],
      join(root, 'etcd.log'),
    );
    try {
      await waitReady(etcd, 30_000, async () => {
        const answer = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
        return answer.ok && ((await answer.json()) as { health?: string }).health === 'true';
      });
      return { process: etcd, url };
    } catch (error) {
      await terminate(etcd, 'SIGKILL', 0);
      if (attempt < 3 && /address already in use/.test(await readFile(etcd.logFile, 'utf8'))) continue;
      throw error;
    }
  }
}

/**
 * One write to a key of the test's own, then a compaction up to it, through etcd's JSON gateway:
 * etcd's revision (the apiserver's resourceVersion) moves past every one a client holds, and no
 * older revision can be watched from.
 */
async function moveEtcdOn(url: string): Promise<void> {
  const call = async (path: string, body: object) => {
    const answer = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(5000) });
    if (!answer.ok) throw new Error(`etcd ${path}: HTTP ${answer.status} ${await answer.text()}`);
    return (await answer.json()) as { header?: { revision?: string } };
  };
  const base64 = (text: string) => Buffer.from(text).toString('base64');
  const put = await call('/v3/kv/put', { key: base64('/podnet-e2e/expire-watches'), value: base64(new Date().toISOString()) });
  const revision = put.header?.revision;
  if (!revision) throw new Error('etcd answered a put without its revision');
  await call('/v3/kv/compaction', { revision, physical: true });
}

function apiserverArgs(root: string, files: Identity, etcdUrl: string, securePort: number, options: ClusterOptions): string[] {
  const node = options.forNode
    ? [
        // The node's name is its loopback address (see nodeName), which is where its kubelet listens.
        '--kubelet-preferred-address-types=InternalIP',
      ]
    : [
        // The ServiceAccount admission plugin refuses a pod while its namespace's `default`
        // account does not exist, and only kube-controller-manager (not run here) makes those.
        '--disable-admission-plugins=ServiceAccount',
      ];
  return [
    ...node,
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    // Without it the apiserver advertises (and certifies) the machine's outward address.
    '--advertise-address=127.0.0.1',
    `--secure-port=${securePort}`,
    // It makes a CA and a serving certificate for 127.0.0.1 and localhost there, and reuses them
    // on a restart.
    `--cert-dir=${join(root, 'pki')}`,
    `--token-auth-file=${files.tokenFile}`,
    '--authorization-mode=Node,RBAC',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${files.saPub}`,
    `--service-account-signing-key-file=${files.saKey}`,
    `--service-cluster-ip-range=${serviceClusterIpRange}`,
    // The `kubernetes` Service's endpoints would be the advertised 127.0.0.1, which Endpoints
    // validation refuses (loopback): with a reconciler the apiserver exits at start.
    '--endpoint-reconciler-type=none',
    // As in kubeadm clusters: a DaemonSet pod like podnet's runs privileged.
    '--allow-privileged=true',
    '--profiling=false',
  ];
}

async function waitApiserverReady(apiserver: Supervised, root: string, server: string, adminToken: string): Promise<void> {
  await waitReady(apiserver, 120_000, async () => {
    // The CA exists once the apiserver has written its self-signed certificates.
    const ca = await apiserverCa(root).catch(() => undefined);
    if (!ca) return false;
    const answer = await httpsGet(`${server}/readyz`, ca, adminToken);
    return answer.status === 200;
  });
}

/** The apiserver's --cert-dir bundle is its serving certificate followed by the CA's. */
async function apiserverCa(root: string): Promise<string> {
  const bundle = await readFile(join(root, 'pki', 'apiserver.crt'), 'utf8');
  const blocks = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
  if (blocks.length < 2) throw new Error(`${root}/pki/apiserver.crt holds no CA certificate after the serving one`);
  return blocks.at(-1)!;
}

function kubeconfigText(server: string, caData: string, user: string, token: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'podnet-e2e', cluster: { server, 'certificate-authority-data': Buffer.from(caData).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'podnet-e2e', user } }],
    'current-context': user,
  });
}

/**
 * Runs a binary in a process group of its own (so a kill reaches anything it starts), writing
 * straight into logFile (no pipe through this process), and killed by the kernel if this process
 * dies without its teardown. Plain spawn rather than execa: execa takes no descriptor for stdout.
 */
export function launch(name: string, file: string, args: string[], logFile: string): Supervised {
  const log = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    const argv = [...dieWithParent, file, ...args];
    child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', log, log] });
  } finally {
    closeSync(log);
  }
  let how: string | undefined;
  const exited = new Promise<string>((resolve) => {
    child.on('error', (error) => resolve((how = `could not start: ${error.message}`)));
    child.on('exit', (code, signal) => resolve((how = signal ? `killed by ${signal}` : `exited with ${code}`)));
  });
  if (child.pid === undefined) {
    // spawn reports a missing binary through 'error' only; there is no process to supervise.
    return { name, pid: 0, logFile, exited, exit: () => how ?? 'could not start' };
  }
  return { name, pid: child.pid, logFile, exited, exit: () => how };
}

/** Signals the process group, waits up to graceMs for the exit, then SIGKILLs the group. */
export async function terminate(p: Supervised, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  const signalGroup = (s: NodeJS.Signals) => {
    if (p.pid === 0) return;
    try {
      process.kill(-p.pid, s);
    } catch {
      // Already gone.
    }
  };
  signalGroup(signal);
  if (signal !== 'SIGKILL') {
    const timer = new Promise<'late'>((r) => setTimeout(() => r('late'), graceMs).unref());
    if ((await Promise.race([p.exited, timer])) === 'late') signalGroup('SIGKILL');
  }
  await p.exited;
}

export async function waitReady(p: Supervised, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const exit = p.exit();
    if (exit) throw new Error(`${p.name} ${exit} before it was ready:\n${await tail(p.logFile)}`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${p.name} was not ready after ${timeoutMs / 1000}s:\n${await tail(p.logFile)}`);
}

function httpsGet(url: string, ca: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { authorization: `Bearer ${token}` }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer in 5s`)));
    req.on('error', reject);
    req.end();
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function ignoreConflict(request: Promise<unknown>): Promise<void> {
  try {
    await request;
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

export async function tail(file: string, lines = 40): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

async function dumpLogs(root: string): Promise<void> {
  for (const name of ['etcd', 'kube-apiserver']) {
    process.stderr.write(`--- last lines of ${name}'s log (test failed) ---\n${await tail(join(root, `${name}.log`))}\n`);
  }
}
