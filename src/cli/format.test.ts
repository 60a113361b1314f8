import t from 'tap';
import type { AttachmentRecord, AttachmentView } from '../protocol/validate.ts';
import { formatAge, formatTable } from './format.ts';
import { podsTable } from './pods.ts';

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;

const now = new Date('2026-03-01T12:00:00.000Z');

/** A view of a record created `ageMs` before `now`. */
function view(ageMs: number, overrides: Partial<AttachmentRecord>, netnsExists: boolean): AttachmentView {
  return {
    record: {
      containerId: '0123456789abcdef0123456789abcdef',
      ifname: 'eth0',
      network: 'kindnet',
      netns: '/var/run/netns/cni-1',
      cniVersion: '1.0.0',
      pod: {},
      createdAt: new Date(now.getTime() - ageMs).toISOString(),
      ...overrides,
    },
    netnsExists,
  };
}

t.test('formatTable', async (t) => {
  t.test('columns are as wide as their widest cell, three spaces apart', async (t) => {
    t.equal(
      formatTable(['NAME', 'IFNAME', 'AGE'], [['web-0', 'eth0', '5s'], ['db', 'net1-long', '12m']]),
      'NAME    IFNAME      AGE\n' +
      'web-0   eth0        5s\n' +
      'db      net1-long   12m\n',
    );
  });

  t.test('the last column is not padded, so no line ends in spaces', async (t) => {
    const text = formatTable(['A', 'LAST'], [['x', ''], ['y', 'longest-cell']]);
    t.equal(text, 'A   LAST\nx\ny   longest-cell\n');
  });

  t.test('no rows prints the header alone', async (t) => {
    t.equal(formatTable(['NAMESPACE', 'NAME'], []), 'NAMESPACE   NAME\n');
  });
});

t.test('formatAge', async (t) => {
  const cases: [number, string][] = [
    [0, '0s'],
    [-5 * second, '0s'],
    [999, '0s'],
    [45 * second, '45s'],
    [2 * minute - 1, '119s'],
    [2 * minute, '2m'],
    [12 * minute + 59 * second, '12m'],
    [2 * hour - 1, '119m'],
    [2 * hour, '2h'],
    [48 * hour - 1, '47h'],
    [48 * hour, '2d'],
    [400 * day, '400d'],
  ];
  for (const [ms, want] of cases) t.equal(formatAge(ms), want, `${ms} ms`);
});

t.test('podsTable', async (t) => {
  t.test('one line per attachment, container id cut to 12, missing identity as -', async (t) => {
    const list = {
      items: [
        view(45 * second, { pod: { namespace: 'shop', name: 'web-0', uid: 'u1' }, ifname: 'net1' }, true),
        view(3 * day, { containerId: 'podmanctr', netns: '/run/netns/netns-7', pod: { name: 'my-container' } }, false),
        view(10 * minute, { containerId: 'c3', adoptedFrom: '/var/lib/cni/results/pods-c3-eth0' }, true),
      ],
    };
    t.equal(
      podsTable(list, now),
      'NAMESPACE   NAME           CONTAINER      IFNAME   NETNS                  AGE   NETNS-EXISTS   ADOPTED\n' +
      'shop        web-0          0123456789ab   net1     /var/run/netns/cni-1   45s   yes            no\n' +
      '-           my-container   podmanctr      eth0     /run/netns/netns-7     3d    no             no\n' +
      '-           -              c3             eth0     /var/run/netns/cni-1   10m   yes            yes\n',
    );
  });

  t.test('an empty list prints the header', async (t) => {
    t.equal(podsTable({ items: [] }, now), 'NAMESPACE   NAME   CONTAINER   IFNAME   NETNS   AGE   NETNS-EXISTS   ADOPTED\n');
  });

  t.test('a record time Date cannot parse shows no NaN', async (t) => {
    // The schema refuses month 13 on the socket; a table must still not print "NaNs" for it.
    const item = view(0, { createdAt: '2026-13-01T00:00:00.000Z' }, true);
    t.notMatch(podsTable({ items: [item] }, now), /NaN/, 'AGE is not "NaNs"');
  });
});

t.test('statusText names each file set aside and why', async (t) => {
  const { statusText } = await import('./status.ts');
  const text = statusText({
    version: '0.1.0',
    attachments: 2,
    spoolPending: 0,
    quarantined: [{ file: '1-2-broken@eth0.json', reason: 'not JSON' }],
  });
  t.match(text, /attachments: +2\n/);
  t.match(text, /quarantined: +1\n {2}1-2-broken@eth0\.json: not JSON\n/);
  t.match(statusText({ version: '0.1.0', attachments: 0, spoolPending: 3, quarantined: [] }), /spool pending: 3\nquarantined: +none\n/);
  t.match(statusText({ version: '0.1.0', attachments: 3, spoolPending: 0, ports: { secured: 2, open: 1 }, quarantined: [] }), /spool pending: 0\nbridge ports: +2 secured, 1 with port security off\nquarantined/);
  t.match(statusText({ version: '0.1.0', attachments: 3, spoolPending: 0, ports: { secured: 2, open: 0, unverified: 2 }, quarantined: [] }), /bridge ports: +2 secured, 0 with port security off\n {2}2 of the secured not filtered as far as podnet can tell: its port security table could not be read, was not whole or lacked their entries \(podnet explain POD says why a pod failed\)\n/, 'secured ports podnet cannot tell are filtered are said');
});
