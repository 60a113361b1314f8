// podnet as a DRA driver on its node (docs/adr/0033), started by the daemon under --dra: the node's
// pool of devices, one per Network it serves, kept in the API server after every pass; and the
// kubelet's plugin, which prepares a pod's claims before its sandbox is made. A prepared claim is
// on file before the kubelet hears so, and the pod's passes read its attachments from there (the
// pod's first pass, inside its ADD, makes them before its first container).
import { join } from 'node:path';
import { PodnetError, toPodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { KubeApi } from '../kube/api.ts';
import type { KubeSource } from '../kube/informers.ts';
import { claimNamesOf, resourceClaimPath } from '../kube/resources.ts';
import { servedOn, type NodeLimits } from '../model/desired.ts';
import { claimDocumentName } from '../model/identity.ts';
import { permissionsByNamespace } from '../model/permissions.ts';
import type { OnQuarantined } from '../registry/quarantine.ts';
import type { DraClaim, DraDevice } from '../grpc/apis.ts';
import { driverName, networkDevices } from './devices.ts';
import { startKubeletPlugin, type KubeletPlugin } from './kubelet-plugin.ts';
import { claimAttachments, prepareClaim, type ClaimObject } from './prepare.ts';
import { PreparedClaims } from './prepared.ts';
import { SlicePublisher } from './slice-publisher.ts';
import { ClaimStatusPublisher } from './claim-status-publisher.ts';
import type { SandboxFacts } from '../status/status.ts';

export interface DraDriver {
  /** After a pass: what the node holds may have changed, and so what its devices offer. */
  afterPass(): void;
  stop(): Promise<void>;
}

export interface DraDriverOptions {
  api: KubeApi;
  source: KubeSource;
  stateDir: string;
  /** The kubelet's root folder (/var/lib/kubelet): its plugins_registry and plugins folders are below it. */
  kubeletDir: string;
  /** By Network, the attachments on the node holding addresses of it that came from no claim. */
  addressesHeldOutsideClaims: () => ReadonlyMap<string, number>;
  /** The Networks an attachment on the node that came from no claim holds or asks. */
  networksAttachedOutsideClaims: () => ReadonlySet<string>;
  /** The sandboxes as the last pass left them: what a claim's status tells. */
  facts: () => readonly SandboxFacts[];
  /** A claim was prepared or unprepared: its pods' passes are due. */
  claimsChanged: () => void;
  onCorrupt: OnQuarantined;
  /** What the node's admin bounds per pod: a claim is held to them as a config is. */
  limits?: NodeLimits;
  log: Logger;
}

export async function startDraDriver(opts: DraDriverOptions): Promise<DraDriver> {
  const { source, log } = opts;
  const prepared = new PreparedClaims(opts.stateDir, opts.onCorrupt);
  // A pod's claims by the names it uses; one prepared for another pod gives this one nothing, told.
  source.readClaimsFrom((pod, uid) =>
    claimNamesOf(pod).flatMap((name) => {
      const claim = prepared.named(pod.metadata.namespace, name);
      if (!claim) return [];
      const asked = claimAttachments(claim);
      return [claim.pods.includes(uid) ? asked : { ...asked, refused: `podnet prepared this claim for another pod; a claim on podnet's Networks gives one pod its interfaces` }];
    }),
  );
  const slices = new SlicePublisher({
    api: opts.api,
    nodeName: source.nodeName,
    log,
    nodeUid: () => source.nodeUid(),
    devices: () => {
      // Offered only once the kubelet took the plugin: a node whose kubelet cannot prepare
      // claims (too old, DRA off) must not draw claimed pods.
      if (!source.synced || !plugin?.registered) return undefined;
      const labels = source.nodeLabels();
      const served = [...source.documents().networks.values()].filter((network) => servedOn(network, labels));
      return networkDevices(served, opts.addressesHeldOutsideClaims(), opts.networksAttachedOutsideClaims());
    },
  });

  const statuses = new ClaimStatusPublisher({ api: opts.api, nodeName: source.nodeName, claims: prepared, facts: opts.facts, log });

  const prepare = async (asked: DraClaim): Promise<{ devices: DraDevice[] } | { error: string }> => {
    const what = claimDocumentName(asked);
    if (!source.synced) return { error: `podnet's daemon on node ${source.nodeName} has not read the API server yet; the kubelet will ask again` };
    let claim: ClaimObject;
    try {
      claim = await opts.api.get<ClaimObject>(resourceClaimPath(asked.namespace, asked.name));
    } catch (err) {
      return { error: `${what}: could not be read: ${toPodnetError(err).message}` };
    }
    if (claim.metadata.uid !== asked.uid) return { error: `${what} is not the claim the kubelet asked for (uid ${asked.uid}; the API server has ${claim.metadata.uid ?? 'none'})` };
    const docs = source.documents();
    const permissions = permissionsByNamespace(docs.permissions).get(asked.namespace) ?? [];
    const made = prepareClaim(claim, { node: source.nodeName, networks: docs.networks, namespaceLabels: source.namespaceLabels(asked.namespace), nodeLabels: source.nodeLabels(), permissions, limits: opts.limits });
    if ('error' in made) {
      log.warn('refused to prepare a claim', { claim: `${asked.namespace}/${asked.name}`, error: made.error });
      return { error: made.error };
    }
    try {
      prepared.put(made);
    } catch (err) {
      return { error: `${what}: could not be recorded in podnet's state dir: ${toPodnetError(err).message}` };
    }
    log.info('prepared a claim', { claim: `${asked.namespace}/${asked.name}`, pods: made.pods, networks: made.devices.map((d) => d.network) });
    opts.claimsChanged();
    return { devices: made.devices.map((d) => ({ requestNames: [d.request], poolName: d.pool, deviceName: d.device, cdiDeviceIds: [], ...(d.shareId ? { shareId: d.shareId } : {}) })) };
  };

  const unprepare = async (asked: DraClaim): Promise<{ error?: string }> => {
    try {
      if (prepared.remove(asked.uid)) {
        log.info('unprepared a claim', { claim: `${asked.namespace}/${asked.name}` });
        opts.claimsChanged();
        // Its status no longer tells an interface and addresses the node may give another pod now.
        void statuses.forget(asked);
      }
      return {};
    } catch (err) {
      return { error: `${claimDocumentName(asked)}: ${toPodnetError(err).message}` };
    }
  };

  let plugin: KubeletPlugin | undefined;
  try {
    plugin = await startKubeletPlugin({ driverName, registryDir: join(opts.kubeletDir, 'plugins_registry'), pluginDir: join(opts.kubeletDir, 'plugins', driverName), handlers: { prepare, unprepare }, onRegistered: () => void slices.verifyNow(), log });
  } catch (err) {
    throw new PodnetError('INVALID_CONFIG', `--dra: cannot serve the kubelet's plugin sockets under ${opts.kubeletDir}: ${(err as Error).message}`);
  }
  return {
    afterPass: () => {
      void slices.publish();
      void statuses.publish();
    },
    async stop() {
      await plugin?.stop();
      await statuses.publish.idle();
      slices.stop();
      await slices.publish.idle();
    },
  };
}

