#!/usr/bin/env node
// Entry when run from the source tree. As a CNI plugin (CNI_COMMAND set) only the plugin path
// loads; otherwise the command line.
if (process.env['CNI_COMMAND']) {
  const { pluginMain } = await import('../src/cni/main.ts');
  await pluginMain();
} else {
  const { cliMain } = await import('../src/cli/main.ts');
  await cliMain(process.argv);
}
