import t from 'tap';
import { formatVersion, parseStateDocument, stateDocumentText } from './state-document.ts';

const record = {
  containerId: 'aaa',
  ifname: 'eth0',
  network: 'kindnet',
  netns: '/var/run/netns/cni-aaa',
  cniVersion: '1.0.0',
  pod: { namespace: 'shop', name: 'pod-aaa' },
  createdAt: '2026-03-01T12:00:00.000Z',
};

t.test('a state file names its format, and reads back as the document without it', async (t) => {
  const text = stateDocumentText(record);
  t.equal((JSON.parse(text) as { version: unknown }).version, formatVersion, 'the version is in the file');
  t.strictSame(parseStateDocument('AttachmentRecord', text, 'record aaa'), record);
});

t.test('a file an older podnet wrote, without a version, is read', async (t) => {
  t.strictSame(parseStateDocument('AttachmentRecord', JSON.stringify(record), 'record aaa'), record);
});

t.test('a file of a format this podnet does not know is refused, naming the file and the field', async (t) => {
  t.throws(() => parseStateDocument('AttachmentRecord', JSON.stringify({ ...record, version: 2 }), 'record aaa'), {
    code: 'IO_FAILURE',
    message: /record aaa.*\/version: must be equal to constant/s,
  });
});

t.test('a file that is not JSON is refused, naming the file', async (t) => {
  t.throws(() => parseStateDocument('AttachmentRecord', '{"containerId": ', 'record aaa'), { message: /^record aaa is not JSON/ });
});
