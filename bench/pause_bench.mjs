#!/usr/bin/env node
// A model called now and then: kiln and ONNX Runtime with their runs back to back and with a
// pause before each (`kiln bench --pause-ms`, `bench_ort.mjs --pause-ms`), in the same run.
// Between back-to-back runs the intra-op threads spin; after a pause they have gone to sleep,
// and the first parallel work of the next call wakes them.
//
//   node bench/pause_bench.mjs --models DIR [--kiln PATH] [--threads N] [--pause-ms N]
//                              [--rounds N] [--only a,b]
//
// Models (default squeezenet1_1, ocr_rec, gpt_prefill) are exported from DIR (as
// bench/compare.sh left it, models.json) with `kiln export`; inputs are each model's first case.
// Each round runs every model and setup in a fresh process, 40 timed runs after 20 untimed
// ones (past a fresh process's first tens of milliseconds, whose runs vary on some machines).
// Prints a Markdown table of the medians over the rounds of each process's median and 90th
// percentile latency, and the ratios to ONNX Runtime.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { caseInputs } from './inputs.mjs';
import { writeNpy } from './npy.mjs';
import { median, parseFlags, runner } from './tool_runs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function fail(message) {
  console.error(`pause_bench: error: ${message}`);
  process.exit(1);
}

const run = runner(fail);

function parseArgs(argv) {
  return parseFlags(argv, {
    models: '', kiln: path.join(ROOT, 'build/release/tools/kiln/kiln'), threads: 2,
    'pause-ms': 30, rounds: 3, only: 'squeezenet1_1,ocr_rec,gpt_prefill',
  }, fail);
}

// Exports `name` and writes its first case's inputs: { program, onnx, flags } (--input flags).
function prepare(args, manifest, name, work) {
  const entry = manifest.models[name];
  if (!entry) fail(`${args.models}/models.json has no ${name} (run bench/compare.sh --only ${name})`);
  const onnx = path.join(args.models, entry.file);
  const program = path.join(work, `${name}.kiln`);
  run(args.kiln, ['export', onnx, '-o', program]);
  const flags = [];
  for (const { name: input, spec, data } of caseInputs(manifest, args.models, name, entry.cases[0])) {
    const file = path.join(work, `${name}.${input}.npy`);
    writeNpy(file, spec.dtype, spec.shape, data);
    flags.push('--input', `${input}=${file}`);
  }
  return { program, onnx, flags };
}

// One process of one setup: { median, p90 } of its timed runs (ms).
function measure(args, model, side, pause, cache) {
  const common = ['--threads', String(args.threads), '--warmup', '20', '--runs', '40',
                  '--pause-ms', String(pause)];
  const json = side === 'ort'
    ? JSON.parse(run(process.execPath, [path.join(ROOT, 'bench/bench_ort.mjs'), model.onnx,
                                        ...model.flags, ...common, '--sessions', '1']))
    : JSON.parse(run(args.kiln, ['bench', model.program, ...model.flags, ...common,
                                 '--option', `KilnBackend.cache_dir=${cache}`, '--json']));
  return { median: json.latency_ms.median, p90: json.latency_ms.p90 };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const pause = Number(args['pause-ms']);
  const manifest = JSON.parse(readFileSync(path.join(args.models, 'models.json'), 'utf8'));
  const names = String(args.only).split(',').filter(Boolean);
  const work = mkdtempSync(path.join(os.tmpdir(), 'kiln-pause-'));
  try {
    const models = Object.fromEntries(names.map((n) => [n, prepare(args, manifest, n, work)]));
    const setups = [];
    for (const name of names) {
      for (const p of [0, pause]) for (const side of ['kiln', 'ort']) setups.push({ name, p, side });
    }
    const results = new Map(setups.map((s) => [JSON.stringify(s), []]));
    for (let r = 0; r < args.rounds; ++r) {
      // Alternate the order between rounds, as run_bench.mjs does.
      const order = r % 2 ? [...setups].reverse() : setups;
      for (const s of order) {
        results.get(JSON.stringify(s)).push(
          measure(args, models[s.name], s.side, s.p, path.join(work, `cache.${s.name}`)));
      }
    }
    const m = (s, key) => median(results.get(JSON.stringify(s)).map((x) => x[key]));
    console.log(`${args.threads} thread(s), ${pause} ms pause before each timed run against none, ` +
                `one process per model, setup and round (20 untimed runs, then 40 timed), ` +
                `median over ${args.rounds} rounds of each process's median and 90th percentile ` +
                '(ms). kiln loads from a warm cache.\n');
    console.log('| model | pause (ms) | kiln median | kiln p90 | ORT median | ORT p90 | ' +
                'median kiln/ORT | p90 kiln/ORT |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const name of names) {
      for (const p of [0, pause]) {
        const k = { name, p, side: 'kiln' };
        const o = { name, p, side: 'ort' };
        console.log(`| ${name} | ${p} | ${m(k, 'median').toFixed(3)} | ${m(k, 'p90').toFixed(3)} | ` +
                    `${m(o, 'median').toFixed(3)} | ${m(o, 'p90').toFixed(3)} | ` +
                    `${(m(k, 'median') / m(o, 'median')).toFixed(2)} | ` +
                    `${(m(k, 'p90') / m(o, 'p90')).toFixed(2)} |`);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
