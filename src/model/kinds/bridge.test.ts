import t from 'tap';
import type { Network } from '../../protocol/validate.ts';
import { bridgeNameOf } from './bridge.ts';

const network = (name: string, spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: {}, ...spec },
});

t.test('bridge name: the one named, else pn- and the Network\'s name cut to 15 characters', async (t) => {
  t.equal(bridgeNameOf(network('blue', { bridge: { name: 'br-lab' } })), 'br-lab');
  t.equal(bridgeNameOf(network('blue')), 'pn-blue');
  t.equal(bridgeNameOf(network('blue', { bridge: { gateway: true } })), 'pn-blue', 'a bridge object without a name');
  const long = bridgeNameOf(network('a-very-long-network-name'));
  t.equal(long, 'pn-a-very-long-');
  t.equal(Buffer.byteLength(long), 15);
});
