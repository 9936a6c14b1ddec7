// Seeded inputs of the real-model set, shared by compare_ort.mjs and run_bench.mjs: each
// input's stream depends only on (seed, model, case, input name), so every script and every run
// draws the same data.

import path from 'node:path';

import { readNpy, typedArrayFor } from './npy.mjs';

function fnv1a(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; ++i) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Data for input `spec` of models.json (normal, uniform or int), seeded by `seedText`. */
export function makeInput(spec, seedText) {
  const random = mulberry32(fnv1a(seedText));
  const count = spec.shape.reduce((a, b) => a * b, 1);
  const data = new (typedArrayFor(spec.dtype))(count);
  for (let i = 0; i < count; ++i) {
    let value;
    if (spec.dist === 'normal') {
      const u = 1 - random();
      value = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random()) * (spec.std ?? 1);
    } else if (spec.dist === 'uniform') {
      value = spec.low + (spec.high - spec.low) * random();
    } else if (spec.dist === 'int') {
      value = spec.low + Math.floor((spec.high - spec.low) * random());
    } else {
      throw new Error(`input distribution '${spec.dist}' (expected normal, uniform or int)`);
    }
    data[i] = data instanceof BigInt64Array || data instanceof BigUint64Array
      ? BigInt(value) : value;
  }
  return data;
}

export function sameShape(a, b) {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** An input stored as a .npy file next to the models; it must have the manifest's dtype and shape. */
export function readInputFile(file, spec) {
  const array = readNpy(file);
  if (array.type !== spec.dtype || !sameShape(array.shape, spec.shape)) {
    throw new Error(`input file ${file} is ${array.type} [${array.shape}] ` +
                    `(expected ${spec.dtype} [${spec.shape}])`);
  }
  return array.data;
}

/**
 * The inputs of case `kase` of model `name` (entries of models.json in `modelsDir`), as
 * [{name, spec, data}] in manifest order.
 */
export function caseInputs(manifest, modelsDir, name, kase) {
  return Object.entries(kase.inputs).map(([input, spec]) => ({
    name: input,
    spec,
    data: spec.dist === 'file'
      ? readInputFile(path.join(modelsDir, spec.file), spec)
      : makeInput(spec, `${manifest.seed}/${name}/${kase.name}/${input}`),
  }));
}
