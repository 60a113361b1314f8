// The shape of src/ (STYLE.md): a pure room never imports an edge, and nothing imports in a
// circle, neither files nor folders. Read from the sources' import lines (type-only ones too: a
// type that wants to live lower is the start of a cycle). Files directly in src/ (errors.ts,
// log.ts, metrics.ts ...) are one level below every folder: any room may import them, and they
// import only each other. Tests are left out: they use the rooms, and no room uses them.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

const pureRooms = ['model', 'planner', 'status'];
const edgeRooms = ['netns', 'executor', 'daemon', 'kube', 'sources'];
const root = '(src/*.ts)';

// `import ... from`, `export ... from`, `import '...'` at the start of a line, and `import('...')`.
const specifiers = /^\s*(?:import|export)\b[\w\s{},*$]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** Each module of src/ (paths relative to it) with the modules of src/ it imports. */
function importGraph(src: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' })
    .map((file) => file.split(sep).join('/'))
    .filter((file) => /\.ts$/.test(file) && !file.endsWith('.test.ts') && !file.startsWith('generated/'));
  for (const file of files.sort()) {
    const imported = new Set<string>();
    for (const specifier of specifiersIn(readFileSync(join(src, file), 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const target = relative(src, join(src, dirname(file), specifier)).split(sep).join('/');
      if (!target.startsWith('../')) imported.add(target); // ../package.json is no room's
    }
    graph.set(file, [...imported].sort());
  }
  return graph;
}

function folderOf(file: string): string {
  return file.includes('/') ? file.slice(0, file.indexOf('/')) : root;
}

/** Each strongly connected component of `graph` (Tarjan) that holds a cycle, with its shortest cycle as a path back to its start. */
function cycles(graph: Map<string, string[]>): { members: Set<string>; cycle: string[] }[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: { members: Set<string>; cycle: string[] }[] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component = new Set<string>();
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.add(member);
    } while (member !== node);
    if (component.size > 1 || graph.get(node)?.includes(node)) found.push({ members: component, cycle: shortestCycle(graph, node, component) });
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** The shortest path from `start` back to itself inside `component` (breadth first). */
function shortestCycle(graph: Map<string, string[]>, start: string, component: Set<string>): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]!;
    for (const next of graph.get(node) ?? []) {
      if (!component.has(next)) continue;
      if (next === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== start && at !== undefined; at = cameFrom.get(at)) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

/** The specifiers `text` imports, in order. */
function specifiersIn(text: string): string[] {
  return [...text.matchAll(specifiers)].map((match) => match[1] ?? match[2] ?? match[3]!);
}

const graph = importGraph(import.meta.dirname);
const fileEdges = [...graph].flatMap(([file, imported]) => imported.map((target) => ({ file, target })));

t.test('every form of import is read', async (t) => {
  const text = [
    "import t from 'tap';",
    "import type { A } from './a.ts';",
    "import {\n  b,\n  type C,\n} from '../b.ts';",
    "import * as d from './d.js';",
    "import './e.ts';",
    "export { f } from './f.ts';",
    "export type * from './g.ts';",
    "  const { h } = await import('../h.ts');",
    '// not an import: taken from "./i.ts"',
  ].join('\n');
  t.same(specifiersIn(text), ['tap', './a.ts', '../b.ts', './d.js', './e.ts', './f.ts', './g.ts', '../h.ts']);
});

t.test('a pure room imports no edge', async (t) => {
  const wrong = fileEdges.filter(({ file, target }) => pureRooms.includes(folderOf(file)) && edgeRooms.includes(folderOf(target)));
  for (const { file, target } of wrong) t.fail(`src/${file} (pure) imports src/${target} (an edge)`);
  if (wrong.length === 0) t.pass(`${pureRooms.join(', ')} import none of ${edgeRooms.join(', ')}`);
});

t.test('the files directly in src/ import no folder', async (t) => {
  const wrong = fileEdges.filter(({ file, target }) => folderOf(file) === root && folderOf(target) !== root);
  for (const { file, target } of wrong) t.fail(`src/${file} imports src/${target}: src/*.ts sit below every folder`);
  if (wrong.length === 0) t.pass('they import only each other');
});

t.test('no cycle between files', async (t) => {
  const found = cycles(graph);
  for (const { members, cycle } of found) {
    const imports = fileEdges.filter(({ file, target }) => members.has(file) && members.has(target)).map(({ file, target }) => `src/${file} imports src/${target}`);
    t.fail(`files import in a circle: ${cycle.map((file) => `src/${file}`).join(' -> ')}`, { imports });
  }
  if (found.length === 0) t.pass(`${graph.size} files, ${fileEdges.length} imports, no cycle`);
});

t.test('no cycle between folders', async (t) => {
  const folders = new Map<string, string[]>();
  const because = new Map<string, string[]>(); // 'a -> b': the file imports that make that arrow
  for (const { file, target } of fileEdges) {
    const [from, to] = [folderOf(file), folderOf(target)];
    if (from === to) continue;
    if (!folders.get(from)?.includes(to)) folders.set(from, [...(folders.get(from) ?? []), to]);
    because.set(`${from} -> ${to}`, [...(because.get(`${from} -> ${to}`) ?? []), `src/${file} imports src/${target}`]);
  }
  const found = cycles(folders);
  for (const { members, cycle } of found) {
    // Every arrow among the folders of the circle, with the imports that make it: cutting it takes some of them.
    const arrows = [...because].filter(([arrow]) => arrow.split(' -> ').every((folder) => members.has(folder)));
    t.fail(`folders import in a circle: ${cycle.join(' -> ')}`, { arrows: Object.fromEntries(arrows) });
  }
  if (found.length === 0) t.pass(`${new Set(fileEdges.map(({ file }) => folderOf(file))).size} folders, no cycle`);
});
