// The state the planner compares: what should be (resolved, with addresses), what is (observed
// with ip -json), and what podnet did before (applied, kept in the state dir).
import type { Where } from '../netns/ip.ts';

/** The interface settings podnet can tune, each remembered and restored on its own. */
export interface LinkSettings {
  mtu?: number;
  txqueuelen?: number;
  mac?: string;
  up?: boolean;
  promisc?: boolean;
}

export const linkSettingNames = ['mtu', 'txqueuelen', 'mac', 'up', 'promisc'] as const;
export type LinkSettingName = (typeof linkSettingNames)[number];

export interface ObservedLink {
  name: string;
  mtu: number;
  up: boolean;
  txqueuelen?: number;
  mac?: string;
  promisc?: boolean;
  kind?: string;
  master?: string;
  /** "198.18.5.2/24", as ip shows local/prefixlen. */
  addresses: string[];
}

export interface Observed {
  pod: ReadonlyMap<string, ObservedLink>;
  host: ReadonlyMap<string, ObservedLink>;
}

/** A desired attachment with everything decided: names and addresses. */
export interface ResolvedAttachment {
  interface: string;
  network: string;
  bridge: string;
  /** The bridge's own addresses (the ranges' gateways), when the Network asks for them. */
  bridgeAddresses: string[];
  hostIf: string;
  mtu?: number;
  addresses: string[];
}

export interface ResolvedTuning {
  interface: string;
  settings: LinkSettings;
}

export interface AppliedAttachment {
  interface: string;
  network: string;
  bridge: string;
  hostIf: string;
  addresses: string[];
}

export interface AppliedTuning {
  interface: string;
  /** What the interface had before podnet changed it, for each setting podnet changed. */
  original: LinkSettings;
}

/** What podnet has done to one sandbox; written after each successful pass. */
export interface AppliedState {
  containerId: string;
  netns: string;
  attachments: AppliedAttachment[];
  tuning: AppliedTuning[];
}

/** One iproute2 command and, where one exists, the command that takes it back. */
export interface Step {
  where: Where;
  line: string;
  undo?: { where: Where; line: string };
}
