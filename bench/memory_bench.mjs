#!/usr/bin/env node
// Memory of GPT prefill + decode in one process (issue target: one multifunction kiln program
// with sharing on peaks at <= 1.15 x one copy of the weights + activations), against two
// separate ONNX Runtime sessions in the same run.
//
//   node bench/memory_bench.mjs --models DIR [--gpt gpt|gpt_large] [--kiln PATH] [--runs N]
//
// Exports GPT_prefill.onnx (method prefill, seq enumerated at the benchmark case's length) and
// GPT_decode.onnx (method decode, past enumerated likewise; GPT is --gpt, default gpt: the small
// model of the speed rows; gpt_large has about 110 MB of weights, which outweigh the fixed
// memory of a runtime) into one --multifunction program,
// fills a fresh cache, then runs N fresh processes of each setup, each loading both methods and
// running each once on the benchmark inputs:
//   kiln, sharing on  | kiln, sharing off | ORT, two sessions
// and reports the median growth of the peak RSS over the RSS before anything was loaded
// (`kiln run`'s "memory" line; process.resourceUsage().maxRSS for ORT), beside the weight
// bytes of one copy (the shared package's size) and the activations (`kiln run`'s planned
// memory, arenas, scratchpads and input and output tensors). Prints a Markdown table.

import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { caseInputs } from './inputs.mjs';
import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function fail(message) {
  console.error(`memory_bench: error: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  return parseFlags(argv, {
    models: '', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'), runs: 5, gpt: 'gpt',
  }, fail);
}

const run = runner(fail);

// The inputs of each model's first (benchmark) case, written as .npy files.
function writeInputs(manifest, args, work) {
  const methods = {};
  for (const [method, model] of [['prefill', `${args.gpt}_prefill`],
                                 ['decode', `${args.gpt}_decode`]]) {
    const entry = manifest.models[model];
    if (!entry) {
      fail(`${args.models}/models.json has no ${model} (run bench/compare.sh --only ${model})`);
    }
    const kase = entry.cases[0];
    const inputs = caseInputs(manifest, args.models, model, kase).map(({ name, spec, data }) => {
      const file = path.join(work, `${method}.${name}.npy`);
      writeNpy(file, spec.dtype, spec.shape, data);
      return { name, spec, data, file };
    });
    methods[method] = { onnx: path.join(args.models, entry.file), inputs };
  }
  return methods;
}

function kilnPeak(args, program, methods, share, cache) {
  const flags = ['run', program];
  for (const [method, { inputs }] of Object.entries(methods)) {
    flags.push('--method', method);
    for (const input of inputs) flags.push('--input', `${method}:${input.name}=${input.file}`);
  }
  // One thread, as the ONNX Runtime side.
  flags.push('--option', `KilnBackend.share_multifunction_model=${share}`,
             '--option', 'KilnBackend.num_threads=1', '--max-values', '1');
  const out = run(args.kiln, flags, { KILN_CACHE_DIR: cache });
  const match = out.match(new RegExp('memory {2}peak RSS ([0-9.]+) MiB, ([0-9.]+) MiB above.*' +
                                     'activations ([0-9.]+) MiB.*inputs and outputs ([0-9.]+) MiB'));
  if (!match) fail(`kiln run printed no memory line:\n${out}`);
  return {
    peak: Number(match[1]), growth: Number(match[2]),
    activations: Number(match[3]) + Number(match[4]),
  };
}

function ortPeak(methods) {
  const spec = JSON.stringify(Object.values(methods).map(({ onnx, inputs }) => ({
    onnx, inputs: inputs.map(({ name, spec: s, file }) => ({ name, dtype: s.dtype, file })),
  })));
  const out = run(process.execPath, [path.join(ROOT, 'bench/memory_ort.mjs'), spec]);
  return JSON.parse(out);
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifest = JSON.parse(readFileSync(path.join(args.models, 'models.json'), 'utf8'));
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-memory-'));
  try {
    const methods = writeInputs(manifest, args, work);
    const seq = methods.prefill.inputs[0].spec.shape[1];
    const past = methods.decode.inputs.find((i) => i.name.startsWith('past')).spec.shape[2];
    const pastInput = methods.decode.inputs.find((i) => i.name.startsWith('past')).name;
    const program = path.join(work, 'gpt.kiln');
    run(args.kiln, ['export', '-o', program, '--multifunction',
                    '--method', `prefill=${methods.prefill.onnx}`,
                    '--method', `decode=${methods.decode.onnx}`,
                    '--enumerate', `prefill:input_ids:1=${seq}`,
                    '--enumerate', `decode:${pastInput}:2=${past}`]);
    const inspect = JSON.parse(run(args.kiln, ['inspect', program, '--json']));
    const packages = (inspect.named_data ?? []).filter((d) => d.key.startsWith('kiln/package/'));
    const weightsMiB = packages.reduce((sum, d) => sum + d.size, 0) / (1 << 20);
    const cache = path.join(work, 'cache');
    kilnPeak(args, program, methods, true, cache);  // cold: specialize and store
    const rows = { on: [], off: [], ort: [] };
    for (let r = 0; r < args.runs; ++r) {
      rows.on.push(kilnPeak(args, program, methods, true, cache));
      rows.off.push(kilnPeak(args, program, methods, false, cache));
      rows.ort.push(ortPeak(methods));
    }
    const m = (list, key) => median(list.map((x) => x[key]));
    const ort = m(rows.ort, 'growth');
    const fmt = (x) => x.toFixed(1);
    // Activations: the methods' planned memory, the compiled functions' arenas and scratchpads,
    // and the methods' input and output tensors, as kiln run reports them with sharing on (the
    // same model and inputs for every row).
    const activations = m(rows.on, 'activations');
    const base = weightsMiB + activations;
    console.log(`${args.gpt} prefill (seq ${seq}) + decode (past ${past}), one process each, ` +
                `median of ${args.runs}; weights (one copy, the shared package): ` +
                `${fmt(weightsMiB)} MiB; activations (kiln's planned memory, arenas, scratchpads, ` +
                `inputs and outputs): ${fmt(activations)} MiB; ` +
                `program ${fmt(statSync(program).size / (1 << 20))} MiB\n`);
    console.log('| setup | peak RSS (MiB) | growth over start (MiB) | growth / ORT | ' +
                'growth / weights | growth / (weights + activations) |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const [label, list] of [['kiln, one multifunction program, sharing on', rows.on],
                                 ['kiln, same program, sharing off', rows.off],
                                 ['ONNX Runtime, two sessions', rows.ort]]) {
      const growth = m(list, 'growth');
      console.log(`| ${label} | ${fmt(m(list, 'peak'))} | ${fmt(growth)} | ` +
                  `${(growth / ort).toFixed(2)} | ${(growth / weightsMiB).toFixed(2)} | ` +
                  `${(growth / base).toFixed(2)} |`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
