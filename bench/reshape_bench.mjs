#!/usr/bin/env node
// Frequent reshapes: GPT prefill called at a new sequence length again and again, in one
// process, on kiln with default options (a plan for the first length; the shape-generic plan
// for the first call of each later one, a plan of its own for its second), kiln with
// `KilnBackend.expect_frequent_reshapes=true` (one shape-generic plan) and ONNX Runtime, in
// the same run.
//
//   node bench/reshape_bench.mjs --models DIR [--kiln PATH] [--threads N] [--rounds N]
//
// Exports DIR/gpt_prefill.onnx (sequence length symbolic) with `kiln export`, writes one input
// per length of LENGTHS (token ids from a fixed seed), and runs each setup in a fresh process
// per round with every length as an input set (`kiln bench` / bench_ort.mjs: an input given N
// times): the load (kiln: program + method in a fresh process; ORT: the median creation time of
// fresh sessions, as bench/run_bench.mjs reports them), then each length's first
// call in order (the time to meet every shape once), then calls cycling through the lengths.
// Prints a Markdown table of the medians over the rounds and the ratios to ONNX Runtime.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Eight lengths up to the benchmark's 128 tokens, in an order that grows and shrinks.
const LENGTHS = [96, 17, 128, 64, 33, 120, 80, 48];

function fail(message) {
  console.error(`reshape_bench: error: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  return parseFlags(argv, {
    models: '', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'), threads: 1, rounds: 3,
  }, fail);
}

const run = runner(fail);

// Token ids below 100 (every GPT of the bench has a larger vocabulary), from a fixed seed.
function writeLengths(work) {
  let state = 12345;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state % 100;
  };
  return LENGTHS.map((length) => {
    const file = path.join(work, `input_ids.${length}.npy`);
    writeNpy(file, 'int64', [1, length], BigInt64Array.from({ length }, () => BigInt(next())));
    return file;
  });
}

// One round of one setup: { load, firstCalls (sum over the lengths), cycling (median) }.
function measure(args, setup, program, onnx, files) {
  const runs = String(4 * LENGTHS.length);
  const warmup = String(LENGTHS.length);
  const inputs = files.flatMap((file) => ['--input', `input_ids=${file}`]);
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
  if (sets.length !== LENGTHS.length) fail(`${setup}: expected ${LENGTHS.length} input sets`);
  return {
    load: setup === 'ort' ? json.session_ms.median : json.load_ms,
    firstCalls: sets.reduce((sum, s) => sum + s.first_run_ms, 0),
    slowestFirst: Math.max(...sets.map((s) => s.first_run_ms)),
    cycling: json.latency_ms.median,
  };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const onnx = path.join(args.models, 'gpt_prefill.onnx');
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-reshape-'));
  try {
    const files = writeLengths(work);
    const program = path.join(work, 'gpt_prefill.kiln');
    run(args.kiln, ['export', onnx, '-o', program]);
    const setups = ['per_shape', 'generic', 'ort'];
    const rows = Object.fromEntries(setups.map((s) => [s, []]));
    for (let r = 0; r < args.rounds; ++r) {
      // Alternate the order between rounds, as run_bench.mjs does.
      const order = r % 2 ? [...setups].reverse() : setups;
      for (const setup of order) rows[setup].push(measure(args, setup, program, onnx, files));
    }
    const m = (setup, key) => median(rows[setup].map((x) => x[key]));
    const fmt = (x) => x.toFixed(2);
    console.log(`gpt_prefill at ${LENGTHS.length} sequence lengths (${LENGTHS.join(', ')}), ` +
                `${args.threads} thread(s), one process per setup and round, median of ` +
                `${args.rounds} rounds. First calls: each length's first call, in that order, ` +
                'summed (and the slowest); later calls: the median of calls cycling through the ' +
                'lengths.\n');
    console.log('| setup | load (ms) | first calls, sum (ms) | slowest first call (ms) | ' +
                'later calls, median (ms) | first calls / ORT | later / ORT |');
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    const labels = {
      per_shape: 'kiln, default options (first shape per-shape, then generic)',
      generic: 'kiln, `expect_frequent_reshapes=true`',
      ort: 'ONNX Runtime',
    };
    for (const setup of setups) {
      console.log(`| ${labels[setup]} | ${fmt(m(setup, 'load'))} | ${fmt(m(setup, 'firstCalls'))} | ` +
                  `${fmt(m(setup, 'slowestFirst'))} | ${fmt(m(setup, 'cycling'))} | ` +
                  `${(m(setup, 'firstCalls') / m('ort', 'firstCalls')).toFixed(2)} | ` +
                  `${(m(setup, 'cycling') / m('ort', 'cycling')).toFixed(2)} |`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
