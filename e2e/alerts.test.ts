// The alert rules podnet ships (daemonset-metrics/alerts.yaml), run by promtool's rule unit tests:
// each alert fires on the series that mean its trouble, only after its `for`, with its labels and
// its annotations as Prometheus renders them; none fires for a healthy daemon. promtool is built
// from the Go module proxy once per machine (e2e/cluster/binaries.ts).
import t from 'tap';
import { execa } from 'execa';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { dir } from 'tmp-promise';
import { ensurePromtool, findGo } from './cluster/binaries.ts';
import { repoRoot } from './lib/env.ts';

interface Rule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
const ruleObject = parse(readFileSync(join(repoRoot, 'daemonset-metrics/alerts.yaml'), 'utf8')) as { spec: { groups: { name: string; rules: Rule[] }[] } };
const rules = ruleObject.spec.groups.flatMap((g) => g.rules);

const skip = process.getuid?.() !== 0 ? 'needs root (promtool is cached in a system folder)' : findGo() ? undefined : 'needs Go to build promtool';

/** The daemon pod's target labels, as the PodMonitor's scrape gives them. */
const daemon = { job: 'podnet-system/podnet', namespace: 'podnet-system', pod: 'podnet-7xk2p' };
const series = (name: string, labels: Record<string, string>) => `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(', ')}}`;

/** An alert's annotations as Prometheus renders them, for the templates these rules use: a label, the value. */
function rendered(alert: string, labels: Record<string, string>, value: string): Record<string, string> {
  const rule = rules.find((r) => r.alert === alert)!;
  const fill = (text: string) => text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, name: string) => labels[name] ?? '').replace(/\{\{ \$value \}\}/g, value);
  return Object.fromEntries(Object.entries(rule.annotations).map(([k, v]) => [k, fill(v)]));
}

interface Case {
  alert: string;
  input: { series: string; values: string }[];
  /** Not yet firing at `quiet`, firing at `firing` with these labels (beside the rule's) and `value`. */
  quiet: string;
  firing: string;
  labels: Record<string, string>;
  value: string;
}

const { job: _job, ...pod } = daemon;
const cases: Case[] = [
  { alert: 'PodnetDaemonDown', input: [{ series: series('up', daemon), values: '1 1 0x20' }], quiet: '6m', firing: '8m', labels: daemon, value: '0' },
  {
    alert: 'PodnetAttachmentsFailing',
    input: [
      { series: series('podnet_attachments', { ...daemon, network: 'blue', state: 'failing' }), values: '0 0 2x30' },
      { series: series('podnet_attachments', { ...daemon, network: 'blue', state: 'ready' }), values: '5x30' },
    ],
    quiet: '11m',
    firing: '13m',
    labels: { ...pod, network: 'blue' },
    value: '2',
  },
  { alert: 'PodnetAttachmentsPending', input: [{ series: series('podnet_attachments', { ...daemon, network: 'red', state: 'pending' }), values: '0 1x30' }], quiet: '15m', firing: '17m', labels: { ...pod, network: 'red' }, value: '1' },
  { alert: 'PodnetSpoolBacklog', input: [{ series: series('podnet_spool_backlog', daemon), values: '0 150x30' }], quiet: '10m', firing: '12m', labels: daemon, value: '150' },
  { alert: 'PodnetFilesQuarantined', input: [{ series: series('podnet_quarantined_files', daemon), values: '0 1x30' }], quiet: '5m', firing: '7m', labels: daemon, value: '1' },
  {
    alert: 'PodnetApiWritesFailing',
    input: [
      { series: series('podnet_api_write_failures_total', { ...daemon, resource: 'pods' }), values: '0+10x40' },
      { series: series('podnet_api_writes_total', { ...daemon, resource: 'pods' }), values: '100x40' },
    ],
    quiet: '14m',
    firing: '30m',
    labels: pod,
    value: '1',
  },
  {
    // Every write failing from the start (RBAC wrong since the install): the daemon serves its successes at 0.
    alert: 'PodnetApiWritesFailing',
    input: [
      { series: series('podnet_api_write_failures_total', { ...daemon, resource: 'events' }), values: '0+5x40' },
      { series: series('podnet_api_writes_total', { ...daemon, resource: 'events' }), values: '0x40' },
    ],
    quiet: '14m',
    firing: '30m',
    labels: pod,
    value: '1',
  },
  {
    alert: 'PodnetPluginCallsFailing',
    input: [{ series: series('podnet_plugin_call_failures_total', { ...daemon, plugin: 'macvlan', command: 'ADD' }), values: '0+1x40' }],
    quiet: '14m',
    firing: '31m',
    labels: { ...pod, plugin: 'macvlan', command: 'ADD' },
    value: '15',
  },
];

/** A daemon with nothing wrong: up, attachments ready, nothing waiting or set aside, writes and calls succeeding. */
const healthy = [
  { series: series('up', daemon), values: '1x40' },
  { series: series('podnet_attachments', { ...daemon, network: 'blue', state: 'ready' }), values: '5x40' },
  { series: series('podnet_spool_backlog', daemon), values: '0x40' },
  { series: series('podnet_quarantined_files', daemon), values: '0x40' },
  { series: series('podnet_api_writes_total', { ...daemon, resource: 'pods' }), values: '0+10x40' },
  { series: series('podnet_api_write_failures_total', { ...daemon, resource: 'pods' }), values: '0x40' },
  { series: series('podnet_plugin_call_failures_total', { ...daemon, plugin: 'macvlan', command: 'ADD' }), values: '3x40' },
  // A call failing now and then (a tenant's bad Network retried with backoff) is not a plugin that keeps failing.
  { series: series('podnet_plugin_call_failures_total', { ...daemon, plugin: 'bridge', command: 'ADD' }), values: '0+0.1x40' },
];

function testFile(expected: (c: Case) => Record<string, string>) {
  return {
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      ...cases.map((c) => ({
        interval: '1m',
        input_series: c.input,
        alert_rule_test: [
          { eval_time: c.quiet, alertname: c.alert, exp_alerts: [] },
          { eval_time: c.firing, alertname: c.alert, exp_alerts: [{ exp_labels: { ...c.labels, ...rules.find((r) => r.alert === c.alert)!.labels }, exp_annotations: expected(c) }] },
        ],
      })),
      { interval: '1m', input_series: healthy, alert_rule_test: rules.map((r) => ({ eval_time: '40m', alertname: r.alert, exp_alerts: [] })) },
    ],
  };
}

t.test("the alert rules are valid, and each fires on its trouble after its wait, with its labels and what to do; none for a healthy daemon", { skip, timeout: 900_000 }, async (t) => {
  t.strictSame(rules.map((r) => r.alert).sort(), [...new Set(cases.map((c) => c.alert))].sort(), 'every alert has its case');
  const promtool = await ensurePromtool();
  const work = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-alerts-' });
  t.teardown(() => work.cleanup());
  await writeFile(join(work.path, 'rules.yaml'), stringify({ groups: ruleObject.spec.groups }));
  const checked = await execa(promtool, ['check', 'rules', 'rules.yaml'], { cwd: work.path, reject: false, all: true });
  t.equal(checked.exitCode, 0, `promtool check rules: ${checked.all}`);

  await writeFile(join(work.path, 'tests.yaml'), stringify(testFile((c) => rendered(c.alert, c.labels, c.value))));
  const tested = await execa(promtool, ['test', 'rules', 'tests.yaml'], { cwd: work.path, reject: false, all: true });
  t.equal(tested.exitCode, 0, `promtool test rules: ${tested.all}`);

  // The same tests against a description that is not the one rendered: promtool must say so.
  await writeFile(join(work.path, 'wrong.yaml'), stringify(testFile((c) => ({ ...rendered(c.alert, c.labels, c.value), description: 'something else' }))));
  const wrong = await execa(promtool, ['test', 'rules', 'wrong.yaml'], { cwd: work.path, reject: false, all: true });
  t.not(wrong.exitCode, 0, 'a wrong expectation fails');
});
