// The plugin's bundle checks its documents with src/generated/plugin-validators.js in place of the
// whole sets (scripts/build.ts): it must export every name they do, judge the plugin's documents
// as they do, and refuse loudly a document it has no schema for.
import t from 'tap';
import * as plugin from '../generated/plugin-validators.js';
import * as whole from '../generated/validators.js';
import { pluginDocuments } from '../../scripts/generate.ts';

type Check = ((value: unknown) => boolean) & { errors?: { instancePath: string }[] | null };

const record = {
  containerId: 'c0ffee01',
  ifname: 'eth0',
  network: 'pods',
  netns: '/var/run/netns/cni-1',
  cniVersion: '1.0.0',
  pod: { namespace: 'shop', name: 'web-0', uid: '1f2e3d' },
  createdAt: '2026-11-22T10:00:00.000Z',
};
const samples: Record<(typeof pluginDocuments)[number], unknown[]> = {
  PluginConfig: [{ cniVersion: '1.0.0', name: 'pods', type: 'podnet' }, { cniVersion: '1.0.0', type: 'podnet' }, { cniVersion: 7, name: 'pods', type: 'podnet' }],
  AttachmentRecord: [record, { ...record, netns: 'relative' }, { ...record, ifname: 'a/b' }],
  AttachmentKey: [{ containerId: 'c0ffee01', ifname: 'eth0' }, { containerId: '', ifname: 'eth0' }, { containerId: 'x' }],
  PodIdentity: [{}, { namespace: 'shop', name: 'web-0' }, { name: 7 }],
  SpoolEntry: [{ op: 'add', record }, { op: 'del', key: { containerId: 'c0ffee01', ifname: 'eth0' } }, { op: 'nope' }],
  CniResult: [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.5/24', interface: 0 }] }, { ips: 'many' }, { interfaces: [{ name: 7 }] }],
};

t.test('every name of the whole set is exported', async (t) => {
  t.strictSame(Object.keys(plugin).sort(), Object.keys(whole).sort());
});

t.test("the plugin's documents are judged as the whole set judges them, first violation included", async (t) => {
  for (const name of pluginDocuments) {
    for (const sample of samples[name]) {
      const [p, w] = [plugin[name] as Check, whole[name] as Check];
      const verdict = w(sample);
      t.equal(p(sample), verdict, `${name} ${JSON.stringify(sample)}: ${verdict ? 'valid' : 'invalid'}`);
      if (!verdict) t.equal(p.errors?.[0]?.instancePath, w.errors?.[0]?.instancePath, `${name}: the same first violation`);
    }
  }
});

t.test('a document the plugin has no schema for throws, naming it and where the list is', async (t) => {
  const others = Object.keys(whole).filter((n) => !(pluginDocuments as readonly string[]).includes(n));
  t.ok(others.length > 0);
  for (const name of others) t.throws(() => (plugin as Record<string, (v: unknown) => boolean>)[name]!({}), { message: `${name} is not a document of the plugin path (scripts/generate.ts pluginDocuments)` });
});
