// What an e2e test needs from the machine, and a clear skip when it is not there.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The built executable; e2e tests exercise what ships, not the source tree. */
export const podnetBinary = `${repoRoot}dist/podnet`;

/** Where Debian's containernetworking-plugins puts the reference plugins. */
export const referencePluginDir = '/usr/lib/cni';

/**
 * Why this machine cannot run a test that needs root and `tools`, or undefined when it can.
 * Under CI a missing tool is not a reason to skip: .ci/run installs them, so it is a failure.
 */
export function missingPrerequisite(tools: readonly string[] = []): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, CNI plugins)';
  if (!existsSync(podnetBinary)) return `needs the built executable ${podnetBinary}: run npm run build`;
  const missing = tools.filter((tool) => !existsSync(tool));
  if (missing.length === 0) return undefined;
  if (process.env['CI']) throw new Error(`CI machine lacks ${missing.join(', ')}; .ci/run should have installed it`);
  return `needs ${missing.join(', ')}`;
}
