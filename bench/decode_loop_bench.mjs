#!/usr/bin/env node
// A decoder's loop: GPT decode called once per generated token, each call with a past one
// token longer than the last (a new input shape every call), in one process, on kiln (default
// options, and `KilnBackend.expect_frequent_reshapes=true`) and ONNX Runtime, in the same run.
//
//   node bench/decode_loop_bench.mjs --models DIR [--kiln PATH] [--threads N] [--rounds N]
//                                    [--steps N] [--model gpt_decode]
//
// Exports DIR/MODEL.onnx with `kiln export`, writes the inputs of each step (models.json's first
// case of MODEL, whose past length is the first step's, the past inputs one position longer at
// each step; seeded data), and runs each setup in a fresh process per round with every step as
// an input set (`kiln bench` / bench_ort.mjs: an input given N times, no warm-up): the loop's
// time is the sum of the steps' first calls (each step is met once, as in generation, the
// first one paying the process's first run). Prints a Markdown table of the medians over the
// rounds and the ratios to ONNX Runtime.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { makeInput } from './inputs.mjs';
import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function fail(message) {
  console.error(`decode_loop_bench: error: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  return parseFlags(argv, {
    models: '', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'), threads: 1, rounds: 3,
    steps: 32, model: 'gpt_decode',
  }, fail);
}

const run = runner(fail);

// The inputs of every step: [{name, file}] per step. Past inputs (rank 4, [batch, heads, past,
// head size]) grow by one position a step; the others keep the case's shape.
function writeSteps(args, work) {
  const manifest = JSON.parse(readFileSync(path.join(args.models, 'models.json'), 'utf8'));
  const model = manifest.models[args.model];
  if (!model) fail(`models.json has no model '${args.model}'`);
  const specs = model.cases[0].inputs;
  const past = Object.entries(specs).find(([name]) => name.startsWith('past'));
  if (!past) fail(`${args.model} has no past input`);
  const first = past[1].shape[2];
  const steps = [];
  for (let step = 0; step < args.steps; ++step) {
    steps.push(Object.entries(specs).map(([name, spec]) => {
      const shape = name.startsWith('past')
        ? [spec.shape[0], spec.shape[1], first + step, spec.shape[3]] : spec.shape;
      const file = path.join(work, `${name}.${step}.npy`);
      const data = makeInput({ ...spec, shape }, `${manifest.seed}/decode_loop/${name}/${step}`);
      writeNpy(file, spec.dtype, shape, data);
      return { name, file };
    }));
  }
  return { steps, first };
}

// One round of one setup: { load, loop (sum of the steps' first calls), slowest, later }.
function measure(args, setup, program, onnx, steps) {
  const inputs = steps.flatMap((step) => step.flatMap(({ name, file }) => ['--input',
    `${name}=${file}`]));
  const common = [...inputs, '--threads', String(args.threads), '--warmup', '0', '--runs',
    String(args.steps)];
  const json = JSON.parse(setup === 'ort'
    ? run(process.execPath, [path.join(ROOT, 'bench/bench_ort.mjs'), onnx, ...common])
    : run(args.kiln, ['bench', program, ...common, '--option',
      `KilnBackend.expect_frequent_reshapes=${setup === 'generic'}`, '--option',
      'KilnBackend.cache_dir=', '--json']));
  const sets = json.input_sets ?? [];
  if (sets.length !== args.steps) fail(`${setup}: expected ${args.steps} input sets`);
  return {
    load: setup === 'ort' ? json.session_ms.median : json.load_ms,
    loop: sets.reduce((sum, s) => sum + s.first_run_ms, 0),
    slowest: Math.max(...sets.slice(1).map((s) => s.first_run_ms)),
    later: json.latency_ms.median,
  };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const onnx = path.join(args.models, `${args.model}.onnx`);
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-decode-loop-'));
  try {
    const { steps, first } = writeSteps(args, work);
    const program = path.join(work, `${args.model}.kiln`);
    run(args.kiln, ['export', onnx, '-o', program]);
    const setups = ['per_shape', 'generic', 'ort'];
    const rows = Object.fromEntries(setups.map((s) => [s, []]));
    for (let r = 0; r < args.rounds; ++r) {
      const order = r % 2 ? [...setups].reverse() : setups;  // alternate, as run_bench.mjs does
      for (const setup of order) rows[setup].push(measure(args, setup, program, onnx, steps));
    }
    const m = (setup, key) => median(rows[setup].map((x) => x[key]));
    const fmt = (x) => x.toFixed(2);
    const fmt3 = (x) => x.toFixed(3);
    console.log(`${args.model} for ${args.steps} steps (past ${first} to ` +
                `${first + args.steps - 1}: every call a new shape), ${args.threads} thread(s), ` +
                `one process per setup and round, median of ${args.rounds} rounds. The loop: ` +
                'the steps\' first calls summed (the first step pays the process\'s first ' +
                'run); slowest step: after the first; later calls: the median of calls cycling ' +
                'through the steps again.\n');
    console.log('| setup | load (ms) | loop (ms) | per step (ms) | slowest step (ms) | ' +
                'later calls, median (ms) | loop / ORT | later / ORT |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    const labels = {
      per_shape: 'kiln, default options',
      generic: 'kiln, `expect_frequent_reshapes=true`',
      ort: 'ONNX Runtime',
    };
    for (const setup of setups) {
      console.log(`| ${labels[setup]} | ${fmt(m(setup, 'load'))} | ${fmt(m(setup, 'loop'))} | ` +
                  `${fmt3(m(setup, 'loop') / args.steps)} | ${fmt(m(setup, 'slowest'))} | ` +
                  `${fmt3(m(setup, 'later'))} | ` +
                  `${(m(setup, 'loop') / m('ort', 'loop')).toFixed(2)} | ` +
                  `${(m(setup, 'later') / m('ort', 'later')).toFixed(2)} |`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
