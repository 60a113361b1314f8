import t from 'tap';
import { decodeMessage, encodeMessage, messageField, repeatedMessages, stringField, stringMap, varintField, type Field } from './wire.ts';

t.test('what is encoded reads back by field number, nested messages and maps included', async (t) => {
  const bytes = encodeMessage([
    [1, 'sandbox-1'],
    [2, true],
    [3, 300],
    [4, [[1, 'inner']]],
    [5, [[1, 'k1'], [2, 'v1']]],
    [5, [[1, 'k2'], [2, 'v2']]],
  ]);
  const message = decodeMessage(bytes, 'test message');
  t.equal(stringField(message, 1), 'sandbox-1');
  t.equal(varintField(message, 2), 1);
  t.equal(varintField(message, 3), 300);
  t.equal(stringField(messageField(message, 4, 'inner'), 1), 'inner');
  t.strictSame([...stringMap(message, 5, 'entry')], [['k1', 'v1'], ['k2', 'v2']]);
  t.equal(repeatedMessages(message, 5, 'entry').length, 2);
  t.equal(stringField(message, 9), '', "an absent field is protobuf's default");
  t.equal(varintField(message, 9), 0);
});

t.test('a varint is the protobuf bytes: 300 is ac 02', async (t) => {
  t.equal(encodeMessage([[1, 300]]).toString('hex'), '08ac02');
  t.equal(encodeMessage([[2, 'hi']]).toString('hex'), '12026869');
});

t.test("fields of wire types podnet does not read (fixed32, fixed64) are skipped, as a newer runtime's reply may have them", async (t) => {
  const bytes = Buffer.concat([Buffer.from([0x0d, 1, 2, 3, 4]), Buffer.from([0x11, 1, 2, 3, 4, 5, 6, 7, 8]), encodeMessage([[3, 'kept']])]);
  t.equal(stringField(decodeMessage(bytes, 'reply'), 3), 'kept');
});

t.test('a reply cut short or made up is an error naming what was read, never a read past the end', async (t) => {
  const whole = encodeMessage([[1, 'sandbox-1']]);
  t.throws(() => decodeMessage(whole.subarray(0, whole.length - 1), 'ListPodSandbox reply'), { code: 'IO_FAILURE', message: /ListPodSandbox reply is not a protobuf message: a field of 9 bytes runs past the end/ });
  t.throws(() => decodeMessage(Buffer.from([0x08, 0x80]), 'reply'), { message: /a varint runs past the end/ });
  t.throws(() => decodeMessage(Buffer.alloc(11, 0xff), 'reply'), { message: /a varint is longer than 10 bytes/ });
  t.throws(() => decodeMessage(Buffer.from([0x0b]), 'reply'), { message: /field 1 has wire type 3/ });
  t.throws(() => decodeMessage(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), 'reply'), { message: /runs past the end/ }, 'a length of 4 GiB in a 6-byte reply');
});

t.test('a field repeated a hundred thousand times (a pod with that many labels) reads in one pass', async (t) => {
  const labels: Field[] = Array.from({ length: 100_000 }, (_, i) => [5, [[1, `k${i}`], [2, 'v']]] as const);
  const map = stringMap(decodeMessage(encodeMessage(labels), 'PodSandbox'), 5, 'label');
  t.equal(map.size, 100_000);
  t.equal(map.get('k99999'), 'v');
});
