// The CustomResourceDefinitions of Network, PodNetworkConfig and PodNetworkPermission, derived from schemas/api.schema.json
// (the single source of truth) by `npm run generate`; never edited by hand.
//
// A CRD takes a structural OpenAPI v3 schema, not JSON Schema 2020-12, so each construct is
// translated, and one that has no translation here fails the generation rather than being dropped:
//  - $ref is inlined, const becomes a one-value enum, every node gets its type;
//  - additionalProperties: false goes: the API server prunes unknown fields instead;
//  - rules between fields (if/then, not-both, dependentRequired) and the route table's integer or
//    "main" become x-kubernetes-validations (CEL), so the API server refuses what podnet would.
import { stringify } from 'yaml';

type Schema = Record<string, unknown>;

const group = 'podnetwork.opdev.io';
const version = 'v1alpha1';

interface Resource {
  def: 'Network' | 'PodNetworkConfig' | 'PodNetworkPermission';
  plural: string;
  scope: 'Cluster' | 'Namespaced';
  shortNames: string[];
  columns: { name: string; type: string; jsonPath: string; description: string; priority?: number }[];
}

const resources: Resource[] = [
  {
    def: 'Network',
    plural: 'networks',
    scope: 'Cluster',
    shortNames: ['pnet'],
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type', description: 'How pods are attached' },
      { name: 'Ready', type: 'string', jsonPath: '.status.ready', description: 'Nodes that serve the network, of those that report' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation' },
      { name: 'Message', type: 'string', jsonPath: '.status.conditions[?(@.type=="Degraded")].message', description: 'Which nodes cannot serve it, and why', priority: 1 },
    ],
  },
  {
    def: 'PodNetworkConfig',
    plural: 'podnetworkconfigs',
    scope: 'Namespaced',
    shortNames: ['pnc'],
    columns: [
      { name: 'Ready', type: 'string', jsonPath: '.status.ready', description: 'Selected pods that have everything the config asks, of those the nodes report' },
      { name: 'Degraded', type: 'string', jsonPath: '.status.conditions[?(@.type=="Degraded")].status', description: 'Whether part of the config cannot be applied' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation' },
      { name: 'Message', type: 'string', jsonPath: '.status.conditions[?(@.type=="Degraded")].message', description: 'What cannot be applied, naming the field' },
    ],
  },
  {
    def: 'PodNetworkPermission',
    plural: 'podnetworkpermissions',
    scope: 'Namespaced',
    shortNames: ['pnperm'],
    columns: [
      { name: 'Allow', type: 'string', jsonPath: '.spec.allow', description: 'The parts the namespace may ask' },
      { name: 'MTU-Min', type: 'integer', jsonPath: '.spec.mtu.min', description: 'The lowest MTU it may set', priority: 1 },
      { name: 'MTU-Max', type: 'integer', jsonPath: '.spec.mtu.max', description: 'The highest MTU it may set', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation' },
    ],
  },
];

/** Thrown for a schema construct the translation does not know: the generator must not drop a rule silently. */
function untranslatable(path: string, what: string): Error {
  return new Error(`scripts/crds.ts cannot translate ${what} at ${path} into a CRD schema; teach it, or write the rule another way`);
}

const quoted = (v: unknown) => (typeof v === 'string' ? `'${v}'` : String(v));
const requiredAll = (fields: unknown) => (fields as string[]).map((f) => `has(self.${f})`).join(' && ');

/** The CEL rule that an if/then between fields of one object says. */
function ifThenRule(cond: Schema, then: Schema, path: string): { rule: string; message: string } {
  const required = then['required'] as string[] | undefined;
  if (!required) throw untranslatable(path, 'a "then" without "required"');
  const props = cond['properties'] as Record<string, Schema> | undefined;
  if (props && Object.keys(cond).length === 1 && Object.keys(props).length === 1) {
    const [field, value] = Object.entries(props)[0]!;
    if (value['const'] === undefined) throw untranslatable(path, 'an "if" on a field other than by const');
    return {
      rule: `self.${field} != ${quoted(value['const'])} || (${requiredAll(required)})`,
      message: `${field} ${String(value['const'])} needs ${required.join(', ')}`,
    };
  }
  const absent = (cond['not'] as Schema | undefined)?.['required'] as string[] | undefined;
  if (absent && Object.keys(cond).length === 1) {
    return { rule: `(${requiredAll(absent)}) || (${requiredAll(required)})`, message: `without ${absent.join(', ')}, ${required.join(', ')} is required` };
  }
  throw untranslatable(path, 'this "if"');
}

/** integer or the one string it also allows (a route table: a number, or "main"). */
function intOrString(variants: Schema[], path: string): Schema {
  const int = variants.find((v) => v['type'] === 'integer');
  const str = variants.find((v) => typeof v['const'] === 'string');
  if (variants.length !== 2 || !int || !str) throw untranslatable(path, 'this oneOf');
  const checks = [`self >= ${String(int['minimum'])}`, `self <= ${String(int['maximum'])}`];
  const excluded = (int['not'] as Schema | undefined)?.['enum'] as number[] | undefined;
  if (excluded) checks.push(`!(self in [${excluded.join(', ')}])`);
  const range = `from ${String(int['minimum'])} to ${String(int['maximum'])}${excluded ? ` other than ${excluded.join(', ')}` : ''}`;
  return {
    'x-kubernetes-int-or-string': true,
    // Bounds the string for CEL's cost estimate: without it the API server refuses the rule as
    // too costly (measured against kube-apiserver 1.37: over budget by 2x inside the route lists).
    maxLength: String(str['const']).length,
    'x-kubernetes-validations': [
      { rule: `type(self) == int ? (${checks.join(' && ')}) : self == ${quoted(str['const'])}`, message: `must be an integer ${range}, or "${String(str['const'])}"` },
    ],
  };
}

function typeOf(values: unknown[], path: string): string {
  const types = new Set(values.map((v) => (Number.isInteger(v) ? 'integer' : typeof v)));
  if (types.size !== 1) throw untranslatable(path, 'an enum of mixed types');
  return [...types][0]!;
}

/** One JSON Schema node as a structural schema node. */
function structural(node: Schema, defs: Record<string, Schema>, path: string): Schema {
  const ref = node['$ref'];
  if (typeof ref === 'string') {
    const name = ref.replace('#/$defs/', '');
    const target = defs[name];
    if (!target) throw untranslatable(path, `the reference ${ref}`);
    const { $ref: _, ...rest } = node;
    return structural({ ...target, ...rest }, defs, path);
  }
  if (Array.isArray(node['oneOf'])) return { ...(node['description'] ? { description: node['description'] } : {}), ...intOrString(node['oneOf'] as Schema[], path) };

  const out: Schema = {};
  const rules: { rule: string; message: string }[] = [];
  for (const [key, value] of Object.entries(node)) {
    switch (key) {
      case 'description':
      case 'type':
      case 'pattern':
      case 'minimum':
      case 'maximum':
      case 'minLength':
      case 'maxLength':
      case 'minItems':
      case 'maxItems':
      case 'minProperties':
      case 'required':
      case 'enum':
      case 'default':
        out[key] = value;
        break;
      case 'const':
        out['enum'] = [value];
        break;
      case 'title':
      case patternRuleKeyword:
        break;
      case 'x-kubernetes-list-type':
      case 'x-kubernetes-list-map-keys':
      case 'x-kubernetes-preserve-unknown-fields':
        out[key] = value;
        break;
      case 'x-kubernetes-validations':
        rules.push(...(value as { rule: string; message: string }[]));
        break;
      case 'additionalProperties':
        if (value === false) break;
        if (value !== true) out[key] = structural(value as Schema, defs, `${path}/additionalProperties`);
        break;
      case 'properties':
        out[key] = Object.fromEntries(Object.entries(value as Record<string, Schema>).map(([p, s]) => [p, structural(s, defs, `${path}/${p}`)]));
        break;
      case 'items':
        out[key] = structural(value as Schema, defs, `${path}/items`);
        break;
      case 'dependentRequired':
        for (const [field, needs] of Object.entries(value as Record<string, string[]>)) {
          rules.push({ rule: `!has(self.${field}) || (${requiredAll(needs)})`, message: `${field} needs ${needs.join(', ')}` });
        }
        break;
      case 'not': {
        const excluded = (value as Schema)['enum'] as unknown[] | undefined;
        if (excluded && Object.keys(value as Schema).length === 1) {
          rules.push({ rule: `!(self in [${excluded.map(quoted).join(', ')}])`, message: `must not be ${excluded.join(', ')}` });
          break;
        }
        const both = (value as Schema)['required'] as string[] | undefined;
        if (!both) throw untranslatable(path, 'this "not"');
        rules.push({ rule: `!(${requiredAll(both)})`, message: `${both.join(' and ')} exclude each other` });
        break;
      }
      case 'if':
        rules.push(ifThenRule(value as Schema, node['then'] as Schema, path));
        break;
      case 'then':
        break;
      case 'allOf':
        for (const [i, part] of (value as Schema[]).entries()) {
          if (Object.keys(part).some((k) => k !== 'if' && k !== 'then')) throw untranslatable(`${path}/allOf/${i}`, 'an allOf part other than if/then');
          rules.push(ifThenRule(part['if'] as Schema, part['then'] as Schema, `${path}/allOf/${i}`));
        }
        break;
      default:
        throw untranslatable(path, `the keyword ${key}`);
    }
  }
  if (out['type'] === undefined) {
    if (out['properties'] || out['additionalProperties']) out['type'] = 'object';
    else if (Array.isArray(out['enum'])) out['type'] = typeOf(out['enum'], path);
    else throw untranslatable(path, 'a node without a type');
  }
  if (rules.length > 0) out['x-kubernetes-validations'] = rules;
  return out;
}

/**
 * podnet's own keyword: a pattern's rule in words, which podnet's messages say instead of the
 * regular expression (src/protocol/validate.ts). Not in the CRDs: the API server knows no such key.
 */
export const patternRuleKeyword = 'x-pattern-rule';

/** The keywords of a JSON Schema that are Kubernetes's alone, passed through to the CRD as they are. */
export const kubernetesKeywords = ['x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-validations'];

/** The CRD of one resource, spec and status (where it has one) from the JSON Schema; the status written by podnet alone. */
function crd(resource: Resource, defs: Record<string, Schema>): Schema {
  const def = defs[resource.def]!;
  const properties = def['properties'] as Record<string, Schema>;
  const spec = structural(properties['spec']!, defs, `${resource.def}/spec`);
  const status = properties['status'] ? structural(properties['status'], defs, `${resource.def}/status`) : undefined;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${resource.plural}.${group}`, labels: { 'app.kubernetes.io/name': 'podnet' } },
    spec: {
      group,
      scope: resource.scope,
      names: {
        kind: resource.def,
        listKind: `${resource.def}List`,
        plural: resource.plural,
        singular: resource.def.toLowerCase(),
        shortNames: resource.shortNames,
        categories: ['podnet'],
      },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          ...(status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: resource.columns,
          schema: {
            openAPIV3Schema: {
              description: def['description'],
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: `${group}/${version}` },
                kind: { type: 'string', description: resource.def },
                metadata: { type: 'object' },
                spec,
                // Written by the node daemons only, through the status subresource.
                ...(status ? { status } : {}),
              },
            },
          },
        },
      ],
    },
  };
}

/** daemonset/crds.yaml: the CRDs, one YAML document each. */
export function crdsYaml(apiSchema: Schema): string {
  const defs = apiSchema['$defs'] as Record<string, Schema>;
  const header = '# Generated by scripts/generate.ts from schemas/api.schema.json. Do not edit.\n';
  return header + resources.map((r) => `---\n${stringify(crd(r, defs), { lineWidth: 0 })}`).join('');
}
