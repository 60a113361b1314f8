import t from 'tap';
import { parseDocuments } from './documents.ts';

t.test('YAML with several documents; each failing one named with its field', async (t) => {
  const text = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: blue }
spec: { type: bridge }
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: c, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: blue, interface: "this-name-is-too-long" }]
---
kind: Pod
---
`;
  const parsed = parseDocuments(text, 'mixed.yaml');
  t.same(parsed.documents.map((d) => d.kind), ['Network']);
  t.match(parsed.problems, [
    { document: 'mixed.yaml document 2', reason: /at \/spec\/attachments\/0\/interface: must match pattern/ },
    { document: 'mixed.yaml document 3', field: 'kind', reason: /kind must be Network or PodNetworkConfig, not "Pod"/ },
  ]);
});

t.test('JSON is read too; a syntax error is a problem of its own', async (t) => {
  t.equal(parseDocuments('{"apiVersion":"podnetwork.opdev.io/v1alpha1","kind":"Network","metadata":{"name":"n"},"spec":{"type":"bridge"}}', 'n.json').documents.length, 1);
  t.match(parseDocuments('kind: [unclosed', 'bad.yaml').problems, [{ document: 'bad.yaml document 1', field: '(syntax)' }]);
});

t.test('a MiB of nested flow collections is told at once, before the parser (which spent seconds on it)', async (t) => {
  const parsed = parseDocuments('['.repeat(1024 * 1024), 'deep.yaml');
  t.same(parsed.problems, [{ document: 'deep.yaml', field: '(syntax)', reason: 'nests mappings and lists more than 64 deep' }]);
});
