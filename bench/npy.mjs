// NumPy .npy files (format 1.0 written; 1.0-3.0 read; little-endian, C order) for Node.

import { readFileSync, writeFileSync } from 'node:fs';

// ONNX Runtime tensor type <-> .npy descr.
const DESCR = {
  float32: '<f4', float64: '<f8', float16: '<f2',
  int8: '|i1', int16: '<i2', int32: '<i4', int64: '<i8',
  uint8: '|u1', uint16: '<u2', uint32: '<u4', uint64: '<u8',
  bool: '|b1',
};
const TYPE_OF_DESCR = Object.fromEntries(
  Object.entries(DESCR).flatMap(([type, d]) => [[d, type], [d.replace(/^[<|]/, '='), type]]));
const ARRAY = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array,
  int8: Int8Array, int16: Int16Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array,
  bool: Uint8Array,
};

export function typedArrayFor(type) {
  const ctor = ARRAY[type];
  if (!ctor) throw new Error(`no typed array for tensor type '${type}'`);
  return ctor;
}

/** Writes `data` (a typed array of `type`, C order) with `shape` as a .npy file. */
export function writeNpy(path, type, shape, data) {
  const descr = DESCR[type];
  if (!descr) throw new Error(`write '${path}': tensor type '${type}' has no .npy form`);
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  const unpadded = 10 + header.length + 1;
  header += ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  writeFileSync(path, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
}

/** Reads a .npy file into {type, shape, data}. */
export function readNpy(path) {
  const bytes = readFileSync(path);
  if (bytes.length < 10 || bytes.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`read '${path}': not a .npy file`);
  }
  const major = bytes[6];
  let headerLength;
  let offset;
  if (major === 1) {
    headerLength = bytes.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLength = bytes.readUInt32LE(8);
    offset = 12;
  } else {
    throw new Error(`read '${path}': .npy version ${major} (expected 1, 2 or 3)`);
  }
  const header = bytes.toString('latin1', offset, offset + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) {
    throw new Error(`read '${path}': malformed header ${JSON.stringify(header)}`);
  }
  if (fortran === 'True') throw new Error(`read '${path}': Fortran order is not supported`);
  const type = TYPE_OF_DESCR[descr];
  if (!type) throw new Error(`read '${path}': dtype '${descr}' is not supported`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const ctor = ARRAY[type];
  const start = offset + headerLength;
  const need = count * ctor.BYTES_PER_ELEMENT;
  if (bytes.length - start < need) {
    throw new Error(`read '${path}': ${bytes.length - start} data bytes (expected ${need})`);
  }
  const copy = new Uint8Array(need);
  copy.set(bytes.subarray(start, start + need));
  return { type, shape, data: new ctor(copy.buffer) };
}

/** IEEE half (as its uint16 bits) to a JS number. */
export function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}
