// bench/ipam: the node's IPAM (src/ipam/ipam.ts) handing out COUNT addresses (default 10,000)
// one owner at a time, then releasing them all, in a Network whose range is a /16 and in one whose
// range is 10.0.0.0/8: the time of each half and the peak memory, each case in a process of its
// own (its VmHWM less its RSS before the first allocation). Anchor, measured in the same run: the
// disk work of the reference host-local plugin for the same addresses (one file per address,
// written, then removed), with no allocation logic at all; the ratio is podnet's time to it.
// Targets (issue 16): 10,000 allocations and releases in under 1 s and under 30 MiB, in each range.
// No root needed: npm run bench:ipam [-- COUNT [RUNS]]
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NodeIpam } from '../src/ipam/ipam.ts';
import { countArgument, median, now } from './lib/harness.ts';

const targetMs = 1000;
const targetMiB = 30;
const ranges = { '/16': '198.18.0.0/16', '10/8': '10.0.0.0/8' } as const;
type RangeName = keyof typeof ranges;

/** What one case measured, in its own process. */
interface Measured {
  allocateMs: number;
  releaseMs: number;
  peakMiB: number;
}

const vmHwmKiB = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN);

/** The child: one case, in a state dir of its own; prints what it measured as JSON. */
function runCase(kind: 'podnet' | 'anchor', range: RangeName, count: number): Measured {
  const dir = mkdtempSync(join(tmpdir(), 'pnbench-ipam-'));
  try {
    const owners = Array.from({ length: count }, (_, i) => `0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab${i}/net1`);
    const rssBefore = process.memoryUsage().rss / 1024;
    let allocateMs: number;
    let releaseMs: number;
    if (kind === 'podnet') {
      const ipam = NodeIpam.open(dir);
      const start = now();
      for (const owner of owners) ipam.allocate('bench', [{ subnet: ranges[range] }], owner);
      allocateMs = now() - start;
      const middle = now();
      for (const owner of owners) ipam.release('bench', owner);
      releaseMs = now() - middle;
    } else {
      // host-local's store: a file named by the address holding its owner, removed at release.
      const store = join(dir, 'bench');
      mkdirSync(store);
      const paths = owners.map((_, i) => join(store, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`));
      const start = now();
      owners.forEach((owner, i) => {
        const fd = openSync(paths[i]!, 'w', 0o600);
        writeSync(fd, owner);
        closeSync(fd);
      });
      allocateMs = now() - start;
      const middle = now();
      for (const path of paths) unlinkSync(path);
      releaseMs = now() - middle;
    }
    return { allocateMs, releaseMs, peakMiB: (vmHwmKiB() - rssBefore) / 1024 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--case') {
  const [kind, range, count] = process.argv.slice(3);
  process.stdout.write(JSON.stringify(runCase(kind as 'podnet' | 'anchor', range as RangeName, Number(count))));
} else {
  const count = countArgument(2, 10_000, 'COUNT');
  const runs = countArgument(3, 5, 'RUNS');
  const self = fileURLToPath(import.meta.url);
  const measure = (kind: 'podnet' | 'anchor', range: RangeName): Measured =>
    JSON.parse(execFileSync(process.execPath, [self, '--case', kind, range, String(count)], { encoding: 'utf8' })) as Measured;

  console.log(`bench/ipam: ${count} allocations then ${count} releases, ${runs} runs per case, medians (alternating podnet and anchor)`);
  let met = true;
  for (const range of Object.keys(ranges) as RangeName[]) {
    const podnet: Measured[] = [];
    const anchor: Measured[] = [];
    for (let run = 0; run < runs; run++) {
      podnet.push(measure('podnet', range));
      anchor.push(measure('anchor', range));
    }
    const total = (m: Measured) => m.allocateMs + m.releaseMs;
    const ms = median(podnet.map(total));
    const anchorMs = median(anchor.map(total));
    const peak = median(podnet.map((m) => m.peakMiB));
    const ok = ms < targetMs && peak < targetMiB;
    met &&= ok;
    console.log(
      `  ${ranges[range].padEnd(14)} podnet ${ms.toFixed(0)} ms (allocate ${median(podnet.map((m) => m.allocateMs)).toFixed(0)}, release ${median(podnet.map((m) => m.releaseMs)).toFixed(0)}), ` +
        `peak +${peak.toFixed(1)} MiB; anchor (host-local's files) ${anchorMs.toFixed(0)} ms: ${(ms / anchorMs).toFixed(2)} x  ` +
        `[target < ${targetMs} ms and < ${targetMiB} MiB: ${ok ? 'met' : 'MISSED'}]`,
    );
  }
  process.exitCode = met ? 0 : 1;
}
