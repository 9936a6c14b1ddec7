#!/usr/bin/env node
// Patterns the importer rewrites: models whose graphs spell out layer normalization (GPT prefill
// at opset 14), RMS normalization (GPT prefill with Llama's RMSNorm) or instance normalization
// (a style-transfer network) or keep each BatchNormalization after its Conv (ResNet-18 exported
// with them preserved), run by kiln as
// exported (the rewrites on, the default), by kiln with the graph as written (`kiln export
// --no-pattern-rewrites`) and by ONNX Runtime, in the same run.
//
//   node bench/pattern_bench.mjs --models DIR [--kiln PATH] [--threads N] [--rounds N]
//
// Makes DIR/resnet18_bn.onnx, DIR/gpt_prefill_opset14.onnx, DIR/gpt_prefill_rmsnorm.onnx and
// DIR/style_instancenorm.onnx with bench/models/make_pattern_models.py when any is missing, exports each both ways, writes a
// seeded input (an image; 128 token ids) and runs each setup in a fresh process per round
// (`kiln bench`, bench_ort.mjs; the order alternates between rounds). Prints a Markdown table of
// the median latencies over the rounds and their ratios.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODELS = [
  { name: 'resnet18_bn', label: 'ResNet-18, Conv + BatchNormalization', input: 'input',
    type: 'float32', shape: [1, 3, 224, 224], runs: 30 },
  { name: 'gpt_prefill_opset14', label: 'GPT prefill (seq 128), opset 14 layer norm',
    input: 'input_ids', type: 'int64', shape: [1, 128], runs: 100 },
  { name: 'gpt_prefill_rmsnorm', label: 'GPT prefill (seq 128), Llama\'s RMSNorm',
    input: 'input_ids', type: 'int64', shape: [1, 128], runs: 100 },
  { name: 'style_instancenorm', label: 'Style transfer (128x128), instance norm written out',
    input: 'image', type: 'float32', shape: [1, 3, 128, 128], runs: 30 },
];

function fail(message) {
  console.error(`pattern_bench: error: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  return parseFlags(argv, {
    models: '', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'), threads: 1, rounds: 5,
  }, fail);
}

const run = runner(fail);

// Seeded values: images in [-1, 1), token ids below 100.
function writeInput(file, model) {
  let state = 12345;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
  const count = model.shape.reduce((a, b) => a * b, 1);
  const data = model.type === 'int64'
    ? BigInt64Array.from({ length: count }, () => BigInt(Math.floor(next() * 100)))
    : Float32Array.from({ length: count }, () => next() * 2 - 1);
  writeNpy(file, model.type, model.shape, data);
}

function latency(args, setup, files, model) {
  const common = ['--input', `${model.input}=${files.input}`, '--threads', String(args.threads),
                  '--runs', String(model.runs)];
  const json = setup === 'ort'
    ? JSON.parse(run(process.execPath, [path.join(ROOT, 'bench/bench_ort.mjs'), files.onnx,
                                        ...common]))
    : JSON.parse(run(args.kiln, ['bench', files[setup], ...common, '--option',
                                 'KilnBackend.cache_dir=', '--json']));
  return json.latency_ms.median;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  if (MODELS.some((m) => !existsSync(path.join(args.models, `${m.name}.onnx`)))) {
    run('/usr/bin/python3', [path.join(ROOT, 'bench/models/make_pattern_models.py'), args.models]);
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-patterns-'));
  const fmt = (v) => (v >= 10 ? v.toFixed(1) : v.toFixed(2));
  try {
    console.log(`${args.threads} thread(s), median over ${args.rounds} rounds of each process's ` +
                'median latency (ms)\n');
    console.log('| model | kiln (ms) | kiln, graph as written (ms) | ORT (ms) | kiln/ORT | ' +
                'as written/ORT | rewrites speed-up |');
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const model of MODELS) {
      const files = {
        onnx: path.join(args.models, `${model.name}.onnx`),
        rewritten: path.join(work, `${model.name}.kiln`),
        written: path.join(work, `${model.name}.written.kiln`),
        input: path.join(work, `${model.name}.npy`),
      };
      run(args.kiln, ['export', files.onnx, '-o', files.rewritten]);
      run(args.kiln, ['export', files.onnx, '-o', files.written, '--no-pattern-rewrites']);
      writeInput(files.input, model);
      const setups = ['rewritten', 'written', 'ort'];
      const times = Object.fromEntries(setups.map((s) => [s, []]));
      for (let r = 0; r < args.rounds; ++r) {
        for (const setup of r % 2 ? [...setups].reverse() : setups) {
          times[setup].push(latency(args, setup, files, model));
        }
      }
      const [k, w, o] = setups.map((s) => median(times[s]));
      console.log(`| ${model.label} | ${fmt(k)} | ${fmt(w)} | ${fmt(o)} | ${(k / o).toFixed(3)} | ` +
                  `${(w / o).toFixed(3)} | ${(w / k).toFixed(2)}x |`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
