// Derives code from the JSON Schemas in schemas/, the single source of truth:
//  - src/generated/validators.js: ajv validators compiled ahead of time ("standalone"), so neither
//    the CNI plugin nor the daemon compiles a schema at start. Each stops at the first violation:
//    ajv's allErrors mode concatenates every failing item's errors into a new array, quadratic in
//    a list's items (a 256 KiB annotation of invalid items took 70 s);
//  - src/generated/violations.js: the same validators with allErrors, run only on a document
//    already found invalid and small enough (src/protocol/validate.ts), to name every violation;
//  - src/generated/plugin-validators.js: the first-violation validators of the documents the CNI
//    plugin checks alone, under the same export names (every other name a function that throws):
//    the plugin's bundle takes it for both modules above (scripts/build.ts), so it carries
//    kilobytes of schema code rather than a megabyte;
//  - src/generated/schema-types.ts: the TypeScript types of the same documents;
//  - daemonset/crds.yaml: the CustomResourceDefinitions of Network, PodNetworkConfig and PodNetworkPermission (scripts/crds.ts).
//  - charts/podnet: the Helm chart, made from daemonset/ (scripts/chart.ts).
//  - src/generated/protos.ts: the gRPC APIs podnet speaks (proto/*.proto: the CRI, the kubelet's
//    plugin registration and DRA driver APIs), as protobufjs descriptors, so no .proto file is read
//    at run time and the single executable carries them.
// `npm run generate` writes them; a unit test fails when they are stale.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import standalone from 'ajv/dist/standalone/index.js';
import { compile } from 'json-schema-to-typescript';
import protobuf from 'protobufjs';
import { crdsYaml, kubernetesKeywords, patternRuleKeyword } from './crds.ts';
import { chartFiles } from './chart.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Export name → schema reference, for every document something validates. */
const validated = {
  PluginConfig: 'https://podnet.opdev.io/schemas/cni-plugin-config.json',
  AttachmentRecord: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/AttachmentRecord',
  AttachmentKey: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/AttachmentKey',
  PodIdentity: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/PodIdentity',
  AttachmentView: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/AttachmentView',
  AttachmentList: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/AttachmentList',
  GcRequest: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/GcRequest',
  GcResponse: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/GcResponse',
  DeleteResponse: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/DeleteResponse',
  FirstPassRequest: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/FirstPassRequest',
  FirstPassResponse: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/FirstPassResponse',
  SpoolEntry: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/SpoolEntry',
  DiffRequest: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/DiffRequest',
  DiffResponse: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/DiffResponse',
  DaemonStatus: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/DaemonStatus',
  ErrorBody: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/ErrorBody',
  SandboxList: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/SandboxList',
  Network: 'https://podnet.opdev.io/schemas/api.json#/$defs/Network',
  PodNetworkConfig: 'https://podnet.opdev.io/schemas/api.json#/$defs/PodNetworkConfig',
  PodNetworkPermission: 'https://podnet.opdev.io/schemas/api.json#/$defs/PodNetworkPermission',
  NetworkSelectionList: 'https://podnet.opdev.io/schemas/api.json#/$defs/NetworkSelectionList',
  NetworkStatusList: 'https://podnet.opdev.io/schemas/api.json#/$defs/NetworkStatusList',
  PodNetworkViewList: 'https://podnet.opdev.io/schemas/api.json#/$defs/PodNetworkViewList',
  PodNetworkConfigStatus: 'https://podnet.opdev.io/schemas/api.json#/$defs/PodNetworkConfigStatus',
  NetworkStatus: 'https://podnet.opdev.io/schemas/api.json#/$defs/NetworkStatus',
  Name: 'https://podnet.opdev.io/schemas/api.json#/$defs/Name',
  AppliedState: 'https://podnet.opdev.io/schemas/state.json#/$defs/AppliedState',
  HostObjects: 'https://podnet.opdev.io/schemas/state.json#/$defs/HostObjects',
  DelegatedRecord: 'https://podnet.opdev.io/schemas/state.json#/$defs/DelegatedRecord',
  PreparedClaim: 'https://podnet.opdev.io/schemas/state.json#/$defs/PreparedClaim',
  ClaimParameters: 'https://podnet.opdev.io/schemas/api.json#/$defs/ClaimParameters',
  Journal: 'https://podnet.opdev.io/schemas/state.json#/$defs/Journal',
  CniResult: 'https://podnet.opdev.io/schemas/protocol.json#/$defs/CniResult',
  IpamState: 'https://podnet.opdev.io/schemas/state.json#/$defs/IpamState',
  IpamOwner: 'https://podnet.opdev.io/schemas/state.json#/$defs/IpamOwner',
  IpamLogEntry: 'https://podnet.opdev.io/schemas/state.json#/$defs/IpamLogEntry',
} as const;

/** What the plugin's path validates (src/cni and what it imports), and nothing else. */
export const pluginDocuments = ['PluginConfig', 'AttachmentRecord', 'AttachmentKey', 'PodIdentity', 'SpoolEntry', 'CniResult'] as const satisfies readonly (keyof typeof validated)[];

const schemaFiles = ['cni-plugin-config.schema.json', 'protocol.schema.json', 'api.schema.json', 'state.schema.json'];

const banner = '// Generated by scripts/generate.ts from schemas/. Do not edit.\n';

async function loadSchemas(): Promise<Record<string, unknown>[]> {
  return Promise.all(
    schemaFiles.map(async (f) => JSON.parse(await readFile(`${root}schemas/${f}`, 'utf8')) as Record<string, unknown>),
  );
}

async function validatorsSource(schemas: Record<string, unknown>[], allErrors: boolean, only?: readonly (keyof typeof validated)[]): Promise<string> {
  // verbose: each error carries the schema it broke, whose x-pattern-rule says a pattern's rule in words.
  const ajv = new Ajv2020({ schemas, code: { source: true, esm: true }, allErrors, verbose: true, strict: true });
  // Said for the CRDs (scripts/crds.ts copies them): how the API server merges a list when
  // several field managers (one per node) apply parts of it. Nothing for ajv to check.
  ajv.addVocabulary(kubernetesKeywords);
  ajv.addVocabulary([patternRuleKeyword]);
  // ajv's ESM output still loads its runtime helpers with require(); make them imports so the
  // module is plain ESM for Node and for the bundler alike.
  const imports: string[] = [];
  const exported = only ? Object.fromEntries(only.map((name) => [name, validated[name]])) : validated;
  const code = standalone.default(ajv, exported).replace(
    /require\("(ajv\/dist\/runtime\/[a-z0-9]+)"\)\.default/g,
    (_match: string, modulePath: string) => {
      const name = `ajvRuntime${imports.length}`;
      // Node hands an ES module the CommonJS exports object as the default import.
      imports.push(`import ${name} from '${modulePath}.js';`);
      return `${name}.default`;
    },
  );
  // A name left out is still exported, as a function saying why it has no schema here.
  const absent = only
    ? Object.keys(validated)
        .filter((name) => !(only as readonly string[]).includes(name))
        .map((name) => `export const ${name} = () => { throw new Error('${name} is not a document of the plugin path (scripts/generate.ts pluginDocuments)'); };`)
    : [];
  return `${banner}// @ts-nocheck\n${imports.join('\n')}\n${code}\n${absent.join('\n')}${absent.length > 0 ? '\n' : ''}`;
}

/**
 * `schema` with each $ref into another schema file made a reference to the type that file's
 * definition becomes: every file's types go to one module, where that type is declared once.
 */
function withForeignRefsAsTypes(schema: Record<string, unknown>): unknown {
  const own = `${String(schema['$id'])}#`;
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (typeof node !== 'object' || node === null) return node;
    const ref = (node as Record<string, unknown>)['$ref'];
    if (typeof ref === 'string' && ref.startsWith('https://') && !ref.startsWith(own)) {
      const name = /#\/\$defs\/([A-Za-z0-9]+)$/.exec(ref)?.[1];
      if (name === undefined) throw new Error(`${String(schema['$id'])}: a $ref into another file must name one of its $defs: ${ref}`);
      return { tsType: name };
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, visit(v)]));
  };
  return visit(schema);
}

async function typesSource(schemas: Record<string, unknown>[]): Promise<string> {
  const parts: string[] = [];
  for (const schema of schemas) {
    const ts = await compile(withForeignRefsAsTypes(schema) as never, String(schema['title']), {
      bannerComment: '',
      unreachableDefinitions: true,
      additionalProperties: false,
      // Arrays stay arrays: a maxItems is checked by ajv, not spelled out as tuples of each length.
      maxItems: -1,
      ignoreMinAndMaxItems: true,
      style: { singleQuote: true },
    });
    parts.push(ts);
  }
  return `${banner}/* eslint-disable */\n${parts.join('\n')}`;
}

/** The .proto files of proto/, by the name src/grpc/ loads each under. */
export const protoFiles = { cri: 'cri.proto', pluginRegistration: 'pluginregistration.proto', dra: 'dra.proto' } as const;

function protosSource(): string {
  const descriptors = Object.entries(protoFiles).map(([name, file]) => {
    const loaded = protobuf.loadSync(`${root}proto/${file}`);
    return `export const ${name} = ${JSON.stringify(loaded.toJSON({ keepComments: false }), null, 2)} as const;\n`;
  });
  return `${banner.replace('schemas/', 'proto/')}${descriptors.join('\n')}`;
}

export async function generatedFiles(): Promise<Record<string, string>> {
  const schemas = await loadSchemas();
  return {
    'src/generated/validators.js': await validatorsSource(schemas, false),
    'src/generated/violations.js': await validatorsSource(schemas, true),
    'src/generated/plugin-validators.js': await validatorsSource(schemas, false, pluginDocuments),
    'src/generated/schema-types.ts': await typesSource(schemas),
    'src/generated/protos.ts': protosSource(),
    'daemonset/crds.yaml': crdsYaml(schemas[schemaFiles.indexOf('api.schema.json')]!),
    ...chartFiles(crdsYaml(schemas[schemaFiles.indexOf('api.schema.json')]!)),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const [file, text] of Object.entries(await generatedFiles())) {
    await mkdir(dirname(`${root}${file}`), { recursive: true });
    await writeFile(`${root}${file}`, text);
    console.log(`wrote ${file}`);
  }
}
