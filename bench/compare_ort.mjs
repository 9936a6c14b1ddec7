#!/usr/bin/env node
// Runs every model of the real-model set on ONNX Runtime (the peer) and on kiln with the same
// seeded inputs, and compares every output.
//
//   node bench/compare_ort.mjs [--models DIR] [--kiln PATH] [--work DIR] [--only a,b]
//                              [--backend kiln|portable] [--rtol 1e-4] [--atol 1e-5]
//                              [--option BACKEND.KEY=VALUE]...
//
// `--option` (repeatable) is passed to every `kiln run`, e.g.
// `--option KilnBackend.expect_frequent_reshapes=true` checks the shape-generic plans.
//
// DIR holds the .onnx files and models.json written by bench/models/make_models.py. For each
// model and each of its input cases, the inputs, ONNX Runtime's outputs and kiln's outputs are
// saved as .npy under WORK/<model>/<case>/{inputs,ort,kiln}/. Prints one line per model:
//   resnet18: match (1 case, max abs err 2.1e-06)
//   vad: export failed: <first line of kiln's error>
// and exits 1 when any model does not match.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { caseInputs, sameShape } from './inputs.mjs';
import { halfToNumber, readNpy, writeNpy } from './npy.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);

function usage(message) {
  if (message) console.error(`compare_ort: error: ${message}`);
  console.error('usage: node bench/compare_ort.mjs [--models DIR] [--kiln PATH] [--work DIR] ' +
                '[--only NAME,...] [--backend kiln|portable] [--rtol R] [--atol A] ' +
                '[--option BACKEND.KEY=VALUE]...');
  process.exit(2);
}

function parseArgs(argv) {
  const args = {
    models: path.join(root, 'build', 'bench-models'),
    kiln: process.env.KILN || path.join(root, 'build', 'release', 'tools', 'kiln', 'kiln'),
    work: path.join(root, 'build', 'bench-compare'),
    only: [],
    backend: 'kiln',
    rtol: 1e-4,
    atol: 1e-5,
    options: [],
  };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    if (flag === '-h' || flag === '--help') usage();
    const value = argv[i + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    ++i;
    if (flag === '--models') args.models = path.resolve(value);
    else if (flag === '--kiln') args.kiln = path.resolve(value);
    else if (flag === '--work') args.work = path.resolve(value);
    else if (flag === '--only') args.only = value.split(',').filter((s) => s);
    else if (flag === '--option') args.options.push('--option', value);
    else if (flag === '--backend') {
      if (value !== 'kiln' && value !== 'portable') {
        usage(`--backend '${value}' (expected kiln or portable)`);
      }
      args.backend = value;
    } else if (flag === '--rtol' || flag === '--atol') {
      const number = Number(value);
      if (!(number >= 0)) usage(`${flag} '${value}' (expected a number >= 0)`);
      args[flag.slice(2)] = number;
    } else usage(`unknown argument '${flag}'`);
  }
  return args;
}

// ---------------------------------------------------------------------------------------------
// Comparison.

function asNumbers(type, data) {
  if (type === 'float16') return Float64Array.from(data, halfToNumber);
  if (type === 'int64' || type === 'uint64') return Array.from(data, Number);
  return data;
}

// Returns {ok, maxAbs, bad, why}.
function compare(expected, actual, rtol, atol) {
  if (expected.type !== actual.type) {
    return { ok: false, why: `dtype ${actual.type} (expected ${expected.type})` };
  }
  if (!sameShape(expected.shape, actual.shape)) {
    return { ok: false, why: `shape [${actual.shape}] (expected [${expected.shape}])` };
  }
  const exact = !['float32', 'float64', 'float16'].includes(expected.type);
  const e = asNumbers(expected.type, expected.data);
  const a = asNumbers(actual.type, actual.data);
  let maxAbs = 0;
  let bad = 0;
  let firstBad = -1;
  for (let i = 0; i < e.length; ++i) {
    const x = e[i];
    const y = a[i];
    if (Number.isNaN(x) || Number.isNaN(y)) {
      if (Number.isNaN(x) && Number.isNaN(y)) continue;
      ++bad;
      if (firstBad < 0) firstBad = i;
      maxAbs = Infinity;
      continue;
    }
    if (x === y) continue;
    const diff = Math.abs(x - y);
    if (!(diff <= maxAbs)) maxAbs = diff;
    if (exact || !(diff <= atol + rtol * Math.abs(x))) {
      ++bad;
      if (firstBad < 0) firstBad = i;
    }
  }
  if (bad === 0) return { ok: true, maxAbs };
  return {
    ok: false, maxAbs,
    why: `${bad} of ${e.length} values outside tolerance, max abs err ${maxAbs.toExponential(2)}` +
         ` (first at flat index ${firstBad}: ${a[firstBad]} vs ${e[firstBad]})`,
  };
}

// ---------------------------------------------------------------------------------------------

// kiln run names output files like this ("logits:0" -> "logits_0.npy").
function outputFileName(name, index) {
  let out = name === '' ? `output_${index}` : name.replace(/[^A-Za-z0-9_.-]/g, '_');
  if (out === '.' || out === '..') out = `output_${index}`;
  return `${out}.npy`;
}

function firstLine(result) {
  const strip = (s) => s.replace(/^kiln \w+: error: /, '');
  if (result.error) return result.error.message;
  if (result.signal) return `killed by ${result.signal}`;
  const lines = `${result.stderr}`.split('\n').filter((l) => l.trim());
  if (lines.length) return strip(lines[0]);
  const out = `${result.stdout}`.split('\n').filter((l) => l.trim());
  return out.length ? out[out.length - 1] : `exit code ${result.status}`;
}

// Runs the kiln tool; KilnBackend's cache goes under the model's work directory, so runs
// neither read nor fill the user's cache (the first case's run is a cold load, later ones warm).
function kiln(args, kilnPath, cacheDir) {
  const env = cacheDir ? { ...process.env, KILN_CACHE_DIR: cacheDir } : process.env;
  return spawnSync(kilnPath, args, { encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 26, env });
}

async function compareModel(ort, name, entry, manifest, args) {
  const model = path.join(args.models, entry.file);
  if (!existsSync(model)) return { ok: false, line: `missing model file ${model}` };
  const work = path.join(args.work, name);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });

  let session;
  try {
    session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'], graphOptimizationLevel: 'all',
      intraOpNumThreads: 1, interOpNumThreads: 1,
    });
  } catch (error) {
    return { ok: false, line: `onnxruntime failed: ${`${error.message}`.split('\n')[0]}` };
  }

  // The peer first, so its inputs and outputs are on disk even when kiln cannot export.
  const runs = [];
  for (const kase of entry.cases) {
    const dir = path.join(work, kase.name);
    const dirs = { inputs: path.join(dir, 'inputs'), ort: path.join(dir, 'ort'),
                   kiln: path.join(dir, 'kiln') };
    Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
    const feeds = {};
    const inputFlags = [];
    for (const { name: input, spec, data } of caseInputs(manifest, args.models, name, kase)) {
      feeds[input] = new ort.Tensor(spec.dtype, data, spec.shape);
      const file = path.join(dirs.inputs, `${input}.npy`);
      writeNpy(file, spec.dtype, spec.shape, data);
      inputFlags.push('--input', `${input}=${file}`);
    }
    let results;
    try {
      results = await session.run(feeds);
    } catch (error) {
      return { ok: false,
               line: `onnxruntime failed (${kase.name}): ${`${error.message}`.split('\n')[0]}` };
    }
    const expected = {};
    session.outputNames.forEach((output, index) => {
      const tensor = results[output];
      const file = path.join(dirs.ort, outputFileName(output, index));
      writeNpy(file, tensor.type, tensor.dims, tensor.data);
      expected[output] = { type: tensor.type, shape: Array.from(tensor.dims), data: tensor.data };
    });
    runs.push({ kase, dirs, inputFlags, expected });
  }

  const program = path.join(work, `${name}.kiln`);
  const exported = kiln(['export', model, '-o', program, '--backend', args.backend], args.kiln);
  if (exported.status !== 0) return { ok: false, line: `export failed: ${firstLine(exported)}` };

  let maxAbs = 0;
  for (const { kase, dirs, inputFlags, expected } of runs) {
    const ran = kiln(['run', program, ...inputFlags, ...args.options, '--output-dir', dirs.kiln],
                     args.kiln,
                     path.join(work, 'cache'));
    if (ran.status !== 0) {
      return { ok: false, line: `run failed (${kase.name}): ${firstLine(ran)}` };
    }
    for (const [index, output] of session.outputNames.entries()) {
      const file = path.join(dirs.kiln, outputFileName(output, index));
      if (!existsSync(file)) {
        return { ok: false, line: `mismatch (${kase.name}): kiln wrote no output '${output}'` };
      }
      const result = compare(expected[output], readNpy(file), args.rtol, args.atol);
      if (!result.ok) {
        return { ok: false, line: `mismatch (${kase.name}) output '${output}': ${result.why}` };
      }
      maxAbs = Math.max(maxAbs, result.maxAbs);
    }
  }
  const cases = entry.cases.length === 1 ? '1 case' : `${entry.cases.length} cases`;
  return { ok: true, line: `match (${cases}, max abs err ${maxAbs.toExponential(2)})` };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifestPath = path.join(args.models, 'models.json');
  if (!existsSync(manifestPath)) {
    usage(`no ${manifestPath}; make the models with ` +
          '/usr/bin/python3 bench/models/make_models.py DIR (or run bench/compare.sh)');
  }
  if (!existsSync(args.kiln)) {
    usage(`no kiln tool at ${args.kiln}; build it with cmake --preset release && ` +
          'cmake --build build/release --target kiln_tool (or pass --kiln PATH)');
  }
  let ort;
  try {
    ort = createRequire(import.meta.url)('onnxruntime-node');
  } catch (error) {
    usage(`cannot load onnxruntime-node (${error.message.split('\n')[0]}); ` +
          'install it with scripts/install-bench-deps.sh');
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const names = args.only.length ? args.only : Object.keys(manifest.models);
  let failed = 0;
  for (const name of names) {
    const entry = manifest.models[name];
    let result;
    if (!entry) {
      result = { ok: false, line: `not in ${manifestPath}` };
    } else {
      try {
        result = await compareModel(ort, name, entry, manifest, args);
      } catch (error) {
        result = { ok: false, line: `error: ${`${error.message}`.split('\n')[0]}` };
      }
    }
    if (!result.ok) ++failed;
    console.log(`${name}: ${result.line}`);
  }
  console.log(`${names.length - failed} of ${names.length} models match ONNX Runtime ` +
              `(backend ${args.backend}, rtol ${args.rtol}, atol ${args.atol})`);
  process.exit(failed ? 1 : 0);
}

main();
