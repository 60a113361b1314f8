// The few protobuf wire rules the CRI messages podnet sends and reads need: varints, and
// length-delimited fields (strings, nested messages, map entries). Fields are told by number, as
// the CRI API's api.proto numbers them; an unknown field is skipped by its wire type, as protobuf
// says, so a newer runtime's reply still reads. Every length is checked against what is left, so
// a reply cut short or made up is an error, never a read past the end.
import { PodnetError } from '../errors.ts';

const WireType = { Varint: 0, Fixed64: 1, LengthDelimited: 2, Fixed32: 5 } as const;

/** A field of a message to encode: a number with a string, a boolean, a varint or a nested message. */
export type Field = readonly [number, string | boolean | number | Field[]];

export function encodeMessage(fields: readonly Field[]): Buffer {
  const parts: Buffer[] = [];
  for (const [number, value] of fields) {
    if (typeof value === 'boolean' || typeof value === 'number') {
      parts.push(varint((number << 3) | WireType.Varint), varint(typeof value === 'boolean' ? Number(value) : value));
      continue;
    }
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : encodeMessage(value);
    parts.push(varint((number << 3) | WireType.LengthDelimited), varint(bytes.length), bytes);
  }
  return Buffer.concat(parts);
}

function varint(value: number): Buffer {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`varint ${value} is not a non-negative safe integer`);
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** A decoded message: each field number's values in order (varints as numbers, the rest as bytes). */
export type Decoded = Map<number, (number | Buffer)[]>;

export function decodeMessage(bytes: Buffer, what: string): Decoded {
  const fields: Decoded = new Map();
  let at = 0;
  const readVarint = (): number => {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (at >= bytes.length) throw malformed(what, 'a varint runs past the end');
      const byte = bytes[at++]!;
      value += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) return value;
      scale *= 0x80;
    }
    throw malformed(what, 'a varint is longer than 10 bytes');
  };
  const take = (length: number): Buffer => {
    if (length > bytes.length - at) throw malformed(what, `a field of ${length} bytes runs past the end`);
    const slice = bytes.subarray(at, at + length);
    at += length;
    return slice;
  };
  while (at < bytes.length) {
    const key = readVarint();
    const number = Math.floor(key / 8);
    const type = key % 8;
    let value: number | Buffer;
    switch (type) {
      case WireType.Varint:
        value = readVarint();
        break;
      case WireType.LengthDelimited:
        value = take(readVarint());
        break;
      case WireType.Fixed64:
        value = take(8);
        break;
      case WireType.Fixed32:
        value = take(4);
        break;
      default:
        throw malformed(what, `field ${number} has wire type ${type}, which no CRI message uses`);
    }
    // In place: a reply may repeat one field (a pod's labels) a hundred thousand times.
    const values = fields.get(number);
    if (values) values.push(value);
    else fields.set(number, [value]);
  }
  return fields;
}

function malformed(what: string, detail: string): PodnetError {
  return new PodnetError('IO_FAILURE', `the container runtime's ${what} is not a protobuf message: ${detail}`);
}

/** The last value of a string field ('' when absent, as protobuf's default). */
export function stringField(message: Decoded, number: number): string {
  const value = message.get(number)?.at(-1);
  return Buffer.isBuffer(value) ? value.toString('utf8') : '';
}

/** The last value of a varint field (0 when absent). */
export function varintField(message: Decoded, number: number): number {
  const value = message.get(number)?.at(-1);
  return typeof value === 'number' ? value : 0;
}

/** A nested message field, decoded (empty when absent). */
export function messageField(message: Decoded, number: number, what: string): Decoded {
  const value = message.get(number)?.at(-1);
  return Buffer.isBuffer(value) ? decodeMessage(value, what) : new Map();
}

/** Every value of a repeated message field, decoded. */
export function repeatedMessages(message: Decoded, number: number, what: string): Decoded[] {
  return (message.get(number) ?? []).flatMap((value) => (Buffer.isBuffer(value) ? [decodeMessage(value, what)] : []));
}

/** A map<string, string> field: protobuf sends each entry as a message with key 1 and value 2. */
export function stringMap(message: Decoded, number: number, what: string): Map<string, string> {
  return new Map(repeatedMessages(message, number, what).map((entry) => [stringField(entry, 1), stringField(entry, 2)]));
}
