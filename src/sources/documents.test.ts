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
    { document: 'mixed.yaml document 2', reason: /at \/spec\/attachments\/0\/interface: must be 1 to 15 letters, digits, '_', '.' and '-', starting with a letter or digit/ },
    { document: 'mixed.yaml document 3', field: 'kind', reason: /kind must be Network, PodNetworkConfig or PodNetworkPermission, not "Pod"/ },
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

t.test('shapes the yaml parser was slow on are refused at once, each naming what is wrong', async (t) => {
  t.same(
    parseDocuments(`#"\n${'['.repeat(100_000)}`, 'deep.yaml').problems,
    [{ document: 'deep.yaml', field: '(syntax)', reason: 'nests mappings and lists more than 64 deep' }],
    'a quote in a comment does not hide the brackets after it',
  );
  t.same(
    parseDocuments('description: it\'s\nspec: ' + '['.repeat(65), 'quote.yaml').problems,
    [{ document: 'quote.yaml', field: '(syntax)', reason: 'nests mappings and lists more than 64 deep' }],
    'nor does a quote inside a plain scalar',
  );
  t.same(
    parseDocuments(`a: b-"\nspec: ${'['.repeat(65)}`, 'dash.yaml').problems,
    [{ document: 'dash.yaml', field: '(syntax)', reason: 'nests mappings and lists more than 64 deep' }],
    'nor one after a dash or colon inside a plain scalar',
  );
  t.same(
    parseDocuments('? '.repeat(400), 'keys.yaml').problems,
    [{ document: 'keys.yaml document 1', field: '(syntax)', reason: 'a mapping has a mapping as a key: keys are names and numbers' }],
    'nested explicit keys',
  );
  t.same(
    parseDocuments('&a { kind: [*a] }\n', 'cycle.yaml').problems,
    [{ document: 'cycle.yaml document 1', field: '(syntax)', reason: 'nests mappings and lists more than 64 deep' }],
    'an alias inside its own anchor',
  );
  const errors = parseDocuments(']\n'.repeat(16_384), 'errors.yaml').problems;
  t.equal(errors.length, 1, 'a file of errors is one problem');
  t.match(errors[0]!.reason, /^Unexpected flow-seq-end token[^;]*(; [^;]+){7}; and 16376 more syntax errors$/, 'naming the first eight and how many more');
});

t.test('quotes and comments are read as YAML reads them by the nesting pre-check', async (t) => {
  const ok = (text: string) => parseDocuments(text, 'x.yaml').problems.filter((p) => p.reason.includes('deep'));
  t.same(ok(`a: "${'['.repeat(100)}"\nb: '${'{'.repeat(100)}'' still quoted'\n# ${'['.repeat(100)}\n`), [], 'brackets in quoted scalars and comments do not count');
  t.same(ok(`a: [${'[1], '.repeat(1000)}]\n`), [], 'a long flow list of shallow items is not deep');
});
