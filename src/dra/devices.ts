// What a node offers the scheduler as podnet's DRA driver (docs/adr/0033): one device per Network
// the node serves, in ResourceSlices of the node's own pool. A device may be allocated to many
// claims (consumable capacity, KEP-5075); on a Network with IPAM its capacity `addresses` is what
// its smallest range can still give to claims, each claim taking exactly one. Pure.
import { createHash } from 'node:crypto';
import type { Network } from '../protocol/validate.ts';
import { choosesRemote, kindOf } from '../model/kinds/index.ts';
import { poolOf } from '../model/pools.ts';
import { byCodeUnits } from '../order.ts';

/** The driver's name: a subdomain of podnet's API group. */
export const driverName = 'dra.podnetwork.opdev.io';

/** The DeviceClass the admin installs, which selects the driver's devices (daemonset/dra.yaml). */
export const deviceClassName = 'podnet';

/** The capacity a claim's allocation takes one of, on a Network with IPAM. */
export const addressesCapacity = 'addresses';

/** The API server's bound on a slice's devices (resource.k8s.io/v1 ResourceSliceMaxDevices). */
export const maxDevicesPerSlice = 128;

/** A device as ResourceSlice v1 has it (the fields podnet sets). */
export interface SliceDevice {
  name: string;
  attributes: Record<string, { string: string } | { int: number } | { bool: boolean }>;
  capacity?: Record<string, { value: string; requestPolicy: { default: string; validValues: string[] } }>;
  /** Left out for a tunnel Network (its kind's onePerNode) whose remote its attachments do not choose: a node has one attachment to it, so one claim. */
  allowMultipleAllocations?: true;
}

/** A ResourceSlice of this node's pool, as podnet writes it. */
export interface ResourceSliceObject {
  apiVersion: 'resource.k8s.io/v1';
  kind: 'ResourceSlice';
  metadata: { name: string; ownerReferences: { apiVersion: 'v1'; kind: 'Node'; name: string; uid: string; controller: true }[] };
  spec: { driver: string; nodeName: string; pool: { name: string; generation: number; resourceSliceCount: number }; devices: SliceDevice[] };
}

/**
 * A Network's device name: its own when it is a DNS label (what a device name must be), else
 * `net-` and a hash of it, which no DNS-label name of a Network can be mistaken for (a Network
 * named like it would need 20 hex digits after net-, and is then its own name: the hash of a
 * name with a dot is never a name without one, by the 2^-80 chance of a collision).
 */
export function deviceNameOf(network: string): string {
  if (/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(network)) return network;
  return `net-${createHash('sha256').update(network).digest('hex').slice(0, 20)}`;
}

/**
 * The addresses a Network's smallest range can hand out on a node: its bounds less the addresses
 * it never gives (network, broadcast, gateway). Undefined without IPAM; none when its ranges are
 * not sound (the Network's status tells why; such a Network gives no address to anyone).
 */
export function addressesOf(network: Network): number | undefined {
  const ranges = network.spec.ipam?.ranges;
  if (!ranges) return undefined;
  try {
    const sizes = ranges.map((range) => {
      const pool = poolOf(network.metadata.name, range);
      const reserved = [...pool.reserved.keys()].filter((value) => value >= pool.start && value <= pool.end).length;
      return pool.end - pool.start + 1n - BigInt(reserved);
    });
    const smallest = sizes.reduce((a, b) => (b < a ? b : a));
    // A capacity is a Quantity; a /64's 2^64 addresses need no more than what a node's pods could take.
    return Number(smallest > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : smallest);
  } catch {
    return 0;
  }
}

/**
 * The device of each served Network that can be one. `heldOutsideClaims`: by Network, the
 * addresses attachments that came from no claim hold on the node (an annotation's, a config's):
 * the scheduler counts the claims it allocated itself, so a device offers its range less these.
 * A Network with no address left to offer is no device (the API server refuses a capacity below
 * its request policy's one value), nor is one whose name is longer than an attribute's value may
 * be (64): a claim could not name it. Nor is a tunnel Network that an attachment from no claim
 * has on the node (`attachedOutsideClaims`): its one attachment a node is taken. A tunnel Network
 * whose attachments choose their remotes is shared as any other: the scheduler cannot see a
 * claim's remote, and the node refuses a second claim to the same one at its ADD, saying why.
 */
export function networkDevices(served: readonly Network[], heldOutsideClaims: ReadonlyMap<string, number>, attachedOutsideClaims: ReadonlySet<string> = new Set()): SliceDevice[] {
  const devices = served.flatMap((network): SliceDevice[] => {
    const name = network.metadata.name;
    if (name.length > maxAttributeValue) return [];
    const attributes: SliceDevice['attributes'] = { network: { string: name }, type: { string: network.spec.type } };
    if (network.spec.mtu !== undefined) attributes['mtu'] = { int: network.spec.mtu };
    const addresses = addressesOf(network);
    const left = addresses === undefined ? undefined : addresses - (heldOutsideClaims.get(name) ?? 0);
    if (left !== undefined && left < 1) return [];
    // A tunnel's one attachment a node is one claim: the device is not shared, nor offered once taken.
    if (kindOf(network).onePerNode !== undefined && !choosesRemote(network)) return attachedOutsideClaims.has(name) ? [] : [{ name: deviceNameOf(name), attributes }];
    const device: SliceDevice = { name: deviceNameOf(name), attributes, allowMultipleAllocations: true };
    if (left !== undefined) device.capacity = { [addressesCapacity]: { value: String(left), requestPolicy: { default: '1', validValues: ['1'] } } };
    return [device];
  });
  return devices.sort((a, b) => byCodeUnits(a.name, b.name));
}

/** The API server's bound on a device attribute's string value. */
export const maxAttributeValue = 64;

/**
 * The node's pool in slices of at most maxDevicesPerSlice devices, named after the node and their
 * index, owned by the Node (the garbage collector deletes them with it). `generation`: higher than
 * any the pool had, so the scheduler takes these over what it saw before. No device: one empty
 * slice, which says the pool exists and offers nothing.
 */
export function poolSlices(node: { name: string; uid: string }, devices: readonly SliceDevice[], generation: number): ResourceSliceObject[] {
  const chunks: SliceDevice[][] = [];
  for (let i = 0; i < devices.length; i += maxDevicesPerSlice) chunks.push(devices.slice(i, i + maxDevicesPerSlice));
  if (chunks.length === 0) chunks.push([]);
  return chunks.map((chunk, i) => ({
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: {
      name: sliceName(node.name, i),
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node.name, uid: node.uid, controller: true }],
    },
    spec: { driver: driverName, nodeName: node.name, pool: { name: node.name, generation, resourceSliceCount: chunks.length }, devices: chunk },
  }));
}

/**
 * `<node>-podnet-<i>`; for a node whose name leaves no room for that in an object name (253),
 * `podnet-<hash of the node's name>-<i>`. The admission policy holds a daemon to these names.
 */
export function sliceName(node: string, index: number): string {
  const suffix = `-podnet-${index}`;
  if (node.length + suffix.length <= 253) return `${node}${suffix}`;
  return `podnet-${createHash('sha256').update(node).digest('hex').slice(0, 32)}-${index}`;
}
