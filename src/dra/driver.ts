// podnet as a DRA driver on its node (docs/adr/0033), started by the daemon under --dra: the node's
// pool of devices, one per Network it serves, kept in the API server after every pass.
import type { Logger } from '../log.ts';
import type { KubeApi } from '../kube/api.ts';
import type { KubeSource } from '../kube/informers.ts';
import { servedOn } from '../model/desired.ts';
import { networkDevices } from './devices.ts';
import { SlicePublisher } from './slice-publisher.ts';

export interface DraDriver {
  /** After a pass: what the node holds may have changed, and so what its devices offer. */
  afterPass(): void;
  stop(): Promise<void>;
}

export interface DraDriverOptions {
  api: KubeApi;
  source: KubeSource;
  /** By Network, the attachments on the node holding addresses of it. */
  addressesHeld: () => ReadonlyMap<string, number>;
  log: Logger;
}

export function startDraDriver(opts: DraDriverOptions): DraDriver {
  const { source } = opts;
  const slices = new SlicePublisher({
    api: opts.api,
    nodeName: source.nodeName,
    log: opts.log,
    nodeUid: () => source.nodeUid(),
    devices: () => {
      if (!source.synced) return undefined;
      const labels = source.nodeLabels();
      const served = [...source.documents().networks.values()].filter((network) => servedOn(network, labels));
      return networkDevices(served, opts.addressesHeld());
    },
  });
  return {
    afterPass: () => void slices.publish(),
    async stop() {
      slices.stop();
      await slices.publish.idle();
    },
  };
}
