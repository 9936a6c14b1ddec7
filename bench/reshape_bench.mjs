#!/usr/bin/env node
// Frequent reshapes: a model called at a new input shape again and again, in one process, on
// kiln with default options (a plan for the first shape; for GPT prefill, the shape-generic
// plan for the first call of each later one and a plan of its own for its second; for the OCR
// detector, a plan per shape), kiln with `KilnBackend.expect_frequent_reshapes=true` (one
// shape-generic plan for every shape) and ONNX Runtime, in the same run.
//
//   node bench/reshape_bench.mjs --models DIR [--model gpt_prefill|ocr_det] [--kiln PATH]
//                                [--threads N] [--rounds N]
//
// --model gpt_prefill (the default): GPT prefill at 8 sequence lengths (token ids from a fixed
// seed); ocr_det: the OCR detector on images of 8 sizes (values from a fixed seed). Exports
// DIR/MODEL.onnx (its dims symbolic) with `kiln export`, writes one input per shape, and runs
// each setup in a fresh process per round with every shape as an input set (`kiln bench` /
// bench_ort.mjs: an input given N times): the load (kiln: program + method in a fresh
// process; ORT: the median creation time of fresh sessions, as bench/run_bench.mjs reports
// them), then each shape's first call in order (the time to meet every shape once), then
// calls cycling through the shapes, and the process's peak RSS over its RSS before the load
// (the memory the model took: plans, weights and activations of every shape). Prints a
// Markdown table of the medians over the rounds and the ratios to ONNX Runtime.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Eight lengths up to the benchmark's 128 tokens, in an order that grows and shrinks.
const LENGTHS = [96, 17, 128, 64, 33, 120, 80, 48];
// Eight image sizes (height x width, multiples of 32) around the benchmark's 320 x 320.
const IMAGE_SIZES = [[320, 320], [256, 384], [480, 320], [224, 224], [320, 480], [384, 256],
                     [416, 320], [288, 352]];

// A linear congruential generator from a fixed seed: values in [0, 1).
function seeded() {
  let state = 12345;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

// What each --model varies: its input, the shapes, how a shape is named and its data.
const MODELS = {
  gpt_prefill: {
    input: 'input_ids',
    what: 'sequence lengths',
    shapes: LENGTHS.map((length) => [1, length]),
    name: (shape) => String(shape[1]),
    // Token ids below 100 (every GPT of the bench has a larger vocabulary).
    write: (file, shape, next) => writeNpy(file, 'int64', shape, BigInt64Array.from(
        { length: shape[1] }, () => BigInt(Math.floor(next() * 100)))),
  },
  ocr_det: {
    input: 'image',
    what: 'image sizes',
    shapes: IMAGE_SIZES.map(([h, w]) => [1, 3, h, w]),
    name: (shape) => `${shape[2]}x${shape[3]}`,
    write: (file, shape, next) => writeNpy(file, 'float32', shape, Float32Array.from(
        { length: shape.reduce((a, b) => a * b, 1) }, () => next() * 2 - 1)),
  },
};

function fail(message) {
  console.error(`reshape_bench: error: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  const args = parseFlags(argv, {
    models: '', model: 'gpt_prefill', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'),
    threads: 1, rounds: 3,
  }, fail);
  if (!MODELS[args.model]) {
    fail(`--model '${args.model}' (expected one of ${Object.keys(MODELS).join(', ')})`);
  }
  return args;
}

const run = runner(fail);

// One input file per shape of `spec`, from a fixed seed.
function writeShapes(work, spec) {
  const next = seeded();
  return spec.shapes.map((shape) => {
    const file = path.join(work, `${spec.input}.${spec.name(shape)}.npy`);
    spec.write(file, shape, next);
    return file;
  });
}

// One round of one setup: { load, firstCalls (sum over the shapes), slowestFirst, cycling
// (median), memory (peak RSS growth, MiB) }.
function measure(args, spec, setup, program, onnx, files) {
  const runs = String(4 * files.length);
  const warmup = String(files.length);
  const inputs = files.flatMap((file) => ['--input', `${spec.input}=${file}`]);
  let json;
  if (setup === 'ort') {
    json = JSON.parse(run(process.execPath,
                          [path.join(ROOT, 'bench/bench_ort.mjs'), onnx, ...inputs, '--threads',
                           String(args.threads), '--warmup', warmup, '--runs', runs]));
  } else {
    json = JSON.parse(run(args.kiln,
                          ['bench', program, ...inputs, '--threads', String(args.threads),
                           '--option', `KilnBackend.expect_frequent_reshapes=${setup === 'generic'}`,
                           '--option', 'KilnBackend.cache_dir=', '--warmup', warmup, '--runs',
                           runs, '--json']));
  }
  const sets = json.input_sets ?? [];
  if (sets.length !== files.length) fail(`${setup}: expected ${files.length} input sets`);
  return {
    load: setup === 'ort' ? json.session_ms.median : json.load_ms,
    firstCalls: sets.reduce((sum, s) => sum + s.first_run_ms, 0),
    slowestFirst: Math.max(...sets.map((s) => s.first_run_ms)),
    cycling: json.latency_ms.median,
    memory: json.memory?.peak_growth_mib ?? NaN,
  };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const spec = MODELS[args.model];
  const onnx = path.join(args.models, `${args.model}.onnx`);
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-reshape-'));
  try {
    const files = writeShapes(work, spec);
    const program = path.join(work, `${args.model}.kiln`);
    run(args.kiln, ['export', onnx, '-o', program]);
    const setups = ['per_shape', 'generic', 'ort'];
    const rows = Object.fromEntries(setups.map((s) => [s, []]));
    for (let r = 0; r < args.rounds; ++r) {
      // Alternate the order between rounds, as run_bench.mjs does.
      const order = r % 2 ? [...setups].reverse() : setups;
      for (const setup of order) rows[setup].push(measure(args, spec, setup, program, onnx, files));
    }
    const m = (setup, key) => median(rows[setup].map((x) => x[key]));
    const fmt = (x) => x.toFixed(2);
    const ratio = (setup, key) => (m(setup, key) / m('ort', key)).toFixed(2);
    console.log(`${args.model} at ${files.length} ${spec.what} ` +
                `(${spec.shapes.map(spec.name).join(', ')}), ${args.threads} thread(s), one ` +
                `process per setup and round, median of ${args.rounds} rounds. First calls: ` +
                'each shape\'s first call, in that order, summed (and the slowest); later calls: ' +
                'the median of calls cycling through the shapes; memory: the process\'s peak ' +
                'RSS over its RSS before the model\'s load (kiln: `kiln bench` "memory"; ORT: ' +
                'before its first session).\n');
    console.log('| setup | load (ms) | first calls, sum (ms) | slowest first call (ms) | ' +
                'later calls, median (ms) | memory (MiB) | first calls / ORT | later / ORT | ' +
                'memory / ORT |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    const labels = {
      per_shape: args.model === 'gpt_prefill'
                     ? 'kiln, default options (first shape per-shape, then generic)'
                     : 'kiln, default options (a plan per shape)',
      generic: 'kiln, `expect_frequent_reshapes=true`',
      ort: 'ONNX Runtime',
    };
    for (const setup of setups) {
      console.log(`| ${labels[setup]} | ${fmt(m(setup, 'load'))} | ${fmt(m(setup, 'firstCalls'))} | ` +
                  `${fmt(m(setup, 'slowestFirst'))} | ${fmt(m(setup, 'cycling'))} | ` +
                  `${m(setup, 'memory').toFixed(1)} | ${ratio(setup, 'firstCalls')} | ` +
                  `${ratio(setup, 'cycling')} | ${ratio(setup, 'memory')} |`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
