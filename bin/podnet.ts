#!/usr/bin/env node
// Entry when run from the source tree. As a CNI plugin (CNI_COMMAND set) only the plugin path
// loads; as the daemon's launcher (PODNET_LAUNCHER set, ADR 22) only the launcher; otherwise the
// command line.
if (process.env['CNI_COMMAND']) {
  const { pluginMain } = await import('../src/cni/main.ts');
  await pluginMain();
} else if (process.env['PODNET_LAUNCHER']) {
  const { launcherMain } = await import('../src/launcher/main.ts');
  launcherMain();
} else {
  const { cliMain } = await import('../src/cli/main.ts');
  await cliMain(process.argv);
}
