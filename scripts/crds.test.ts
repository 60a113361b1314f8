import t from 'tap';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { crdsYaml } from './crds.ts';

const apiSchema = JSON.parse(readFileSync(new URL('../schemas/api.schema.json', import.meta.url), 'utf8')) as Record<string, unknown>;
type Node = Record<string, unknown>;

const crds = parseAllDocuments(crdsYaml(apiSchema)).map((d) => d.toJS() as Node);
const schemaOf = (crd: Node) => ((crd['spec'] as Node)['versions'] as Node[])[0]!['schema'] as { openAPIV3Schema: Node };

/** Every node of a schema with its path. */
function* nodes(node: Node, path = ''): Generator<[string, Node]> {
  yield [path, node];
  for (const [key, child] of Object.entries(node['properties'] ?? {}) as [string, Node][]) yield* nodes(child, `${path}.${key}`);
  if (typeof node['items'] === 'object') yield* nodes(node['items'] as Node, `${path}[]`);
  if (typeof node['additionalProperties'] === 'object') yield* nodes(node['additionalProperties'] as Node, `${path}{}`);
}

t.test('one CRD per resource, in podnet\'s group, with the status subresource where podnet writes a status', async (t) => {
  t.strictSame(crds.map((c) => (c['metadata'] as Node)['name']), ['networks.podnetwork.opdev.io', 'podnetworkconfigs.podnetwork.opdev.io', 'podnetworkpermissions.podnetwork.opdev.io']);
  t.strictSame(crds.map((c) => (c['spec'] as Node)['scope']), ['Cluster', 'Namespaced', 'Namespaced'], 'an admin offers Networks cluster-wide; a tenant configures its namespace; an admin bounds a namespace in it');
  t.strictSame(crds.map((c) => ((c['spec'] as Node)['versions'] as Node[])[0]!['subresources']), [{ status: {} }, { status: {} }, undefined], 'a permission has no status');
});

t.test('the schemas are structural: every node typed, nothing of JSON Schema 2020-12 left', async (t) => {
  for (const crd of crds) {
    const faults: string[] = [];
    for (const [path, node] of nodes(schemaOf(crd).openAPIV3Schema)) {
      if (typeof node['type'] !== 'string' && node['x-kubernetes-int-or-string'] !== true) faults.push(`${path} has no type`);
      for (const key of ['$ref', 'const', 'oneOf', 'allOf', 'if', 'then', 'not', 'dependentRequired']) if (key in node) faults.push(`${path} has ${key}`);
      // Unknown fields are pruned by the API server; additionalProperties: false is not allowed.
      if (node['additionalProperties'] === false) faults.push(`${path} has additionalProperties: false`);
    }
    t.strictSame(faults, [], String((crd['metadata'] as Node)['name']));
  }
});

t.test('rules between fields become CEL rules where the fields are', async (t) => {
  const [network, config] = crds.map((c) => schemaOf(c).openAPIV3Schema);
  const spec = (network!['properties'] as Node)['spec'] as Node;
  t.match(spec['x-kubernetes-validations'], [
    { rule: "self.type != 'macvlan' || (has(self.macvlan))", message: 'type macvlan needs macvlan' },
    { rule: "self.type != 'ipvlan' || (has(self.ipvlan))", message: 'type ipvlan needs ipvlan' },
    { rule: "self.type != 'vxlan' || (has(self.vxlan))" },
    { rule: "self.type != 'vlan' || (has(self.vlan))" },
  ]);
  const vxlan = (spec['properties'] as Node)['vxlan'] as Node;
  t.match(vxlan['x-kubernetes-validations'], [{ rule: '!(has(self.remote) && has(self.group))' }]);
  const route = ((((config!['properties'] as Node)['spec'] as Node)['properties'] as Node)['routes'] as Node)['items'] as Node;
  t.match(route['x-kubernetes-validations'], [{ rule: '(has(self.via)) || (has(self.dev))', message: 'without via, dev is required' }]);
  const table = (route['properties'] as Node)['table'] as Node;
  t.equal(table['x-kubernetes-int-or-string'], true, 'a route table is a number or "main"');
  t.equal(table['maxLength'], 4, 'its string is bounded: the API server refuses an unbounded one as too costly for CEL');
  t.match(table['x-kubernetes-validations'], [{ rule: /type\(self\) == int \? .*!\(self in \[253, 254, 255\]\)\) : self == 'main'/ }]);
});

t.test('a construct it cannot translate fails the generation, naming where', async (t) => {
  const withUnknown = structuredClone(apiSchema) as { $defs: Record<string, Node> };
  (withUnknown.$defs['Mtu'] as Node)['multipleOf'] = 2;
  t.throws(() => crdsYaml(withUnknown), /cannot translate the keyword multipleOf at Network\/spec\/mtu/);
  const withAnyOf = structuredClone(apiSchema) as { $defs: Record<string, Node> };
  withAnyOf.$defs['RouteTable'] = { oneOf: [{ type: 'integer' }, { type: 'boolean' }] };
  t.throws(() => crdsYaml(withAnyOf), /cannot translate this oneOf at PodNetworkConfig\/spec\/routes\/items\/table/);
});

t.test('every field has a description, so that kubectl explain teaches the API', async (t) => {
  for (const crd of crds) {
    const bare = [...nodes(schemaOf(crd).openAPIV3Schema)]
      // metadata is the API server's ObjectMeta, which kubectl explains itself; a list's items and
      // a map's values are explained by their list and map.
      .filter(([path, node]) => !path.startsWith('.metadata') && !/(\[\]|\{\})$/.test(path) && typeof node['description'] !== 'string')
      .map(([path]) => path || '(top level)');
    t.strictSame(bare, [], `${String((crd['metadata'] as Node)['name'])}: no field without a description`);
  }
});
