// The cni kind: any CNI plugin config or list, run for the pod's interface as a runtime would
// (src/delegate/); its plugins make the link and choose its addresses.
import { delegatedConfigOf, isConfigProblem } from '../cni-config.ts';
import type { DelegatedKind } from './kind.ts';

export const cniKind: DelegatedKind<'cni'> = {
  type: 'cni',
  attachedBy: 'plugins',
  refusedAsks: (network) => ({
    bandwidth: `rate limits need a bridge Network: Network ${network.metadata.name}'s plugins make its link (a bandwidth plugin in its list can shape it)`,
    ips: `Network ${network.metadata.name}'s plugins choose its addresses (their ipam config); podnet does not pass static ones to them`,
  }),
  specProblems(network) {
    const config = delegatedConfigOf(network);
    return isConfigProblem(config) ? [{ field: config.field, reason: config.reason }] : [];
  },
  delegatedConfig: delegatedConfigOf,
  describe: (config) => `plugins ${config.plugins.map((p) => String(p['type'])).join(', ')}`,
};
