#!/usr/bin/env node
// Speed of kiln against ONNX Runtime on the real-model set: `kiln bench` and bench_ort.mjs,
// each a fresh process, interleaved over several rounds; the medians and ratios go into a table.
//
//   node bench/run_bench.mjs [--models DIR] [--backend kiln|portable] [--kiln PATH] [--work DIR]
//                            [--threads 1,2] [--runs N] [--rounds N] [--only a,b]
//                            [--results FILE|-]
//
// For each model of DIR/models.json (its first input case): export it with
// `kiln export --backend kiln` (default; or portable), write the case's seeded inputs
// (inputs.mjs, the same data as compare_ort.mjs), then, per thread count, run the cold process:
// `kiln bench` with a fresh, empty `--option KilnBackend.cache_dir=DIR` (its load specializes
// and stores). The first cold process and one short ORT run calibrate the runs per process: as
// many as fit in a few seconds, at least 3 and at most --runs (default 100). Then, for each
// round (default 3), model and thread count, `kiln bench --json` (a warm load: the same cache
// directory; then `--later-loads`, as many as ORT's later sessions) and `bench_ort.mjs` run one
// after the other (the order alternates between rounds).
// Each cell of the table is the median over the rounds of each process's median latency, load
// time or ORT session creation time; the cold load is the median `load_ms` of the cold
// processes (the first, and one more per round, each with its own fresh cache directory); the
// `cache` field is printed as kiln bench reported it. Prints the table and writes it, with the
// command, date, machine and versions, to --results (default bench/RESULTS.md; '-' writes
// nothing). Exits 1 when any model failed.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync }
  from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { format, machine, makeRow, resultsMarkdown, summary, table } from './bench_report.mjs';
import { caseInputs } from './inputs.mjs';
import { measurePeak, modelLayerTable, peakNote, singleLayerTable } from './layer_report.mjs';
import { writeNpy } from './npy.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);

// Seconds of timed runs each process aims for, per side; the warm-up aims for half a second.
const KILN_RUN_BUDGET_MS = 3000;
const ORT_RUN_BUDGET_MS = 1500;
const WARMUP_BUDGET_MS = 500;
const SESSION_BUDGET_MS = 2000;

function usage(message) {
  if (message) console.error(`run_bench: error: ${message}`);
  console.error('usage: bench/run_bench.sh [--models DIR] [--backend kiln|portable] ' +
                '[--kiln PATH] [--work DIR] [--threads 1,2] [--runs N] [--rounds N] ' +
                '[--only NAME,...] [--results FILE|-]');
  process.exit(2);
}

function positive(flag, text) {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) usage(`${flag} '${text}' (expected an integer >= 1)`);
  return value;
}

function parseArgs(argv) {
  const args = {
    models: path.join(root, 'build', 'bench-models'),
    backend: 'kiln',
    kiln: process.env.KILN || path.join(root, 'build', 'release', 'tools', 'kiln', 'kiln'),
    work: path.join(root, 'build', 'bench-run'),
    threads: [1, 2],
    runs: 100,
    rounds: 3,
    only: [],
    results: path.join(here, 'RESULTS.md'),
  };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    if (flag === '-h' || flag === '--help') usage();
    const value = argv[i + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    ++i;
    if (flag === '--models') args.models = path.resolve(value);
    else if (flag === '--backend') {
      if (value !== 'kiln' && value !== 'portable') {
        usage(`--backend '${value}' (expected kiln or portable)`);
      }
      args.backend = value;
    } else if (flag === '--kiln') args.kiln = path.resolve(value);
    else if (flag === '--work') args.work = path.resolve(value);
    else if (flag === '--threads') {
      args.threads = value.split(',').map((t) => positive('--threads', t));
    } else if (flag === '--runs') args.runs = positive(flag, value);
    else if (flag === '--rounds') args.rounds = positive(flag, value);
    else if (flag === '--only') args.only = value.split(',').filter((s) => s);
    else if (flag === '--results') args.results = value === '-' ? '' : path.resolve(value);
    else usage(`unknown argument '${flag}'`);
  }
  return args;
}

function clamp(value, low, high) {
  return Math.min(Math.max(value, low), high);
}

// The error line of a failed process (kiln's "error:" line rather than a note before it).
function firstLine(result) {
  if (result.error) return result.error.message;
  if (result.signal) return `killed by ${result.signal}`;
  const lines = `${result.stderr}`.split('\n').filter((l) => l.trim());
  const line = lines.find((l) => l.includes('error:')) ?? lines[0];
  return line ? line.replace(/^kiln \w+: error: /, '') : `exit code ${result.status}`;
}

// Runs a command that prints one JSON object; throws with its first error line otherwise.
function runJson(command, commandArgs, what) {
  const result = spawnSync(command, commandArgs,
                           { encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 26 });
  if (result.status !== 0) throw new Error(`${what} failed: ${firstLine(result)}`);
  return JSON.parse(result.stdout);
}

// Exports the model and writes the inputs of its first case; returns what the rounds need.
function prepareModel(name, entry, manifest, args) {
  const kase = entry.cases[0];
  const dir = path.join(args.work, name);
  const inputsDir = path.join(dir, kase.name, 'inputs');
  mkdirSync(inputsDir, { recursive: true });
  const inputFlags = [];
  for (const { name: input, spec, data } of caseInputs(manifest, args.models, name, kase)) {
    const file = path.join(inputsDir, `${input}.npy`);
    writeNpy(file, spec.dtype, spec.shape, data);
    inputFlags.push('--input', `${input}=${file}`);
  }
  const model = path.join(args.models, entry.file);
  const program = path.join(dir, `${name}.${args.backend}.kiln`);
  const exported = spawnSync(args.kiln,
                             ['export', model, '-o', program, '--backend', args.backend],
                             { encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 26 });
  if (exported.status !== 0) throw new Error(`export failed: ${firstLine(exported)}`);
  // kiln export notes, e.g. a model the engine cannot take that stays portable.
  const notes = `${exported.stderr}`.split('\n').filter((l) => l.startsWith('note: '));
  return { name, caseName: kase.name, model, program, inputFlags, notes, cacheDirs: new Map() };
}

// `kiln bench` of the job at `threads`: `--option KilnBackend.cache_dir` is the job's cache
// directory for that thread count (backend kiln only); `counts.laterLoads` more loads in the
// process when given; `--profile` when `counts.profile`.
function kilnBench(job, threads, counts, args, cacheDir = job.cacheDirs.get(threads)) {
  const options = [];
  if (cacheDir) options.push('--option', `KilnBackend.cache_dir=${cacheDir}`);
  if (counts.laterLoads) options.push('--later-loads', `${counts.laterLoads}`);
  if (counts.profile) options.push('--profile');
  return runJson(args.kiln, ['bench', job.program, ...job.inputFlags, ...options,
                             '--threads', `${threads}`, '--warmup', `${counts.warmup}`,
                             '--runs', `${counts.runs}`, '--json'], 'kiln bench');
}

function ortBench(job, threads, plan) {
  return runJson(process.execPath,
                 [path.join(here, 'bench_ort.mjs'), job.model, ...job.inputFlags,
                  '--threads', `${threads}`, '--warmup', `${plan.ortWarmup}`,
                  '--runs', `${plan.ortRuns}`, '--sessions', `${plan.sessions}`],
                 'bench_ort');
}

// The first cold processes, one per thread count, each with a fresh and empty cache directory
// (the first process to use it: its load specializes and stores), one timed run each. The
// rounds then reuse each directory, so their loads are warm.
function coldLoads(job, args) {
  const cold = new Map();
  for (const threads of args.threads) {
    if (args.backend === 'kiln') {
      job.cacheDirs.set(threads, mkdtempSync(path.join(os.tmpdir(), `kiln-bench-${job.name}-`)));
    }
    cold.set(threads, kilnBench(job, threads, { warmup: 0, runs: 1 }, args));
  }
  return cold;
}

// One more cold process for a round: its own fresh cache directory, removed afterwards, so
// that the cold load is a median over the rounds like every other cell.
function roundCold(job, threads, args) {
  if (args.backend !== 'kiln') return kilnBench(job, threads, { warmup: 0, runs: 1 }, args);
  const dir = mkdtempSync(path.join(os.tmpdir(), `kiln-bench-${job.name}-`));
  try {
    return kilnBench(job, threads, { warmup: 0, runs: 1 }, args, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The first cold process and one short ORT process estimate the latencies (and ORT's session
// time), so that slow models get fewer runs.
function calibrate(job, kiln, args) {
  const ort = ortBench(job, args.threads[0], { ortWarmup: 0, ortRuns: 1, sessions: 1 });
  const runs = (budget, ms) => clamp(Math.floor(budget / Math.max(ms, 1e-3)), 3, args.runs);
  const warmup = (ms) => clamp(Math.round(WARMUP_BUDGET_MS / Math.max(ms, 1e-3)), 1, 5);
  const kilnMs = kiln.latency_ms.median;
  const ortMs = ort.latency_ms.median;
  return {
    kilnRuns: runs(KILN_RUN_BUDGET_MS, kilnMs), kilnWarmup: warmup(kilnMs),
    ortRuns: runs(ORT_RUN_BUDGET_MS, ortMs), ortWarmup: warmup(ortMs),
    sessions: clamp(Math.floor(SESSION_BUDGET_MS / Math.max(ort.session_ms.median, 1)), 3, 5),
  };
}

// Two `kiln bench --profile` processes per model and thread count, on the warm cache, as many
// runs as the rounds' processes, keeping the faster (a process whose second thread shares a
// core with other work measures the host, not the kernels): where the Conv and MatMul layers'
// time goes.
function profileModels(jobs, args) {
  const profiles = [];
  for (const job of jobs) {
    if (job.failed) continue;
    for (const threads of args.threads) {
      const counts = { warmup: job.plan.kilnWarmup, runs: job.plan.kilnRuns, profile: true };
      try {
        const reports = [0, 1].map(() => kilnBench(job, threads, counts, args));
        const report = reports.reduce((a, b) => (b.latency_ms.median < a.latency_ms.median ? b : a));
        profiles.push({ model: job.name, threads, report });
      } catch (error) {
        profiles.push({ model: job.name, threads, report: {} });
        console.error(`${job.name}: profile: ${error.message.split('\n')[0]}`);
      }
    }
  }
  return profiles;
}

function kilnVersion(args) {
  try {
    return execFileSync(args.kiln, ['--version'], { encoding: 'utf8' }).trim()
      .replace(/^kiln /, '');
  } catch {
    return '?';
  }
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifestPath = path.join(args.models, 'models.json');
  if (!existsSync(manifestPath)) {
    usage(`no ${manifestPath}; make the models with bench/run_bench.sh or ` +
          '/usr/bin/python3 bench/models/make_models.py DIR');
  }
  if (!existsSync(args.kiln)) {
    usage(`no kiln tool at ${args.kiln}; build it with cmake --preset release && ` +
          'cmake --build build/release --target kiln_tool (or pass --kiln PATH)');
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const names = args.only.length ? args.only : Object.keys(manifest.models);
  const started = Date.now();
  const loadAtStart = os.loadavg()[0].toFixed(1);
  const log = (line) => console.error(`[${((Date.now() - started) / 1000).toFixed(0)}s] ${line}`);

  const jobs = [];
  const failures = [];
  const removeCaches = () => {
    for (const job of jobs) {
      for (const dir of job.cacheDirs.values()) rmSync(dir, { recursive: true, force: true });
    }
  };
  process.on('exit', removeCaches);
  process.on('SIGINT', () => process.exit(130));
  for (const name of names) {
    const entry = manifest.models[name];
    try {
      if (!entry) throw new Error(`not in ${manifestPath}`);
      const job = prepareModel(name, entry, manifest, args);
      jobs.push(job);
      for (const note of job.notes) log(`${name}: export ${note}`);
      job.cold = coldLoads(job, args);
      job.plan = calibrate(job, job.cold.get(args.threads[0]), args);
      job.results = new Map(args.threads.map((t) => [t, { kiln: [], ort: [],
                                                          cold: [job.cold.get(t)] }]));
      const colds = args.threads.map((t) => `${t}: ${format(job.cold.get(t).load_ms)} ms ` +
                                             `(cache ${job.cold.get(t).cache})`);
      log(`${name}: exported (${args.backend}); cold load ${colds.join(', ')}; ` +
          `kiln ${job.plan.kilnRuns} runs, ORT ${job.plan.ortRuns} runs`);
    } catch (error) {
      if (jobs.at(-1)?.name === name) jobs.at(-1).failed = true;
      failures.push([name, error.message.split('\n')[0]]);
      log(`${name}: ${error.message.split('\n')[0]}`);
    }
  }

  let ortVersion = '?';
  for (let round = 0; round < args.rounds; ++round) {
    for (const job of jobs) {
      if (job.failed) continue;
      for (const threads of args.threads) {
        const cell = job.results.get(threads);
        // As many later loads as ORT's process creates later sessions.
        const counts = { warmup: job.plan.kilnWarmup, runs: job.plan.kilnRuns,
                         laterLoads: job.plan.sessions - 1 };
        try {
          cell.cold.push(roundCold(job, threads, args));
          const sides = [() => cell.kiln.push(kilnBench(job, threads, counts, args)),
                         () => cell.ort.push(ortBench(job, threads, job.plan))];
          if (round % 2) sides.reverse();
          sides.forEach((side) => side());
        } catch (error) {
          job.failed = error.message.split('\n')[0];
          failures.push([job.name, job.failed]);
          break;
        }
        ortVersion = cell.ort.at(-1).onnxruntime;
        log(`round ${round + 1}/${args.rounds} ${job.name} threads ${threads}: kiln ` +
            `${format(cell.kiln.at(-1).latency_ms.median)} ms (load ` +
            `${format(cell.kiln.at(-1).load_ms)} ms, cache ${cell.kiln.at(-1).cache}; cold ` +
            `${format(cell.cold.at(-1).load_ms)} ms), ORT ` +
            `${format(cell.ort.at(-1).latency_ms.median)} ms`);
      }
    }
  }

  const rows = [];
  const notes = [];
  for (const job of jobs) {
    if (job.failed) continue;
    for (const threads of args.threads) {
      const { kiln, ort, cold } = job.results.get(threads);
      rows.push(makeRow(job, threads, cold, kiln, ort));
    }
    for (const note of job.notes) notes.push(`- ${job.name}: export ${note}`);
  }
  const parts = [table(rows, failures), summary(rows, args.backend)];
  if (notes.length) parts.push(notes.join('\n'));
  log('FMA peak (kiln_cpu_bench, when built)');
  const peak = measurePeak(args.kiln);
  parts.push(peakNote(peak));
  if (args.backend === 'kiln') {
    log('layers inside the models (kiln bench --profile)');
    parts.push(modelLayerTable(profileModels(jobs, args), peak));
  }
  log('single layers (kiln_cpu_bench, when built)');
  const layers = singleLayerTable(args.kiln, peak);
  if (layers) parts.push(layers);
  if (args.backend === 'kiln' && names.includes('gpt_prefill')) {
    for (const threads of args.threads) {
      log(`reshapes: gpt_prefill at changing lengths, ${threads} thread(s) (bench/reshape_bench.mjs)`);
      parts.push(reshapeTable(args, threads));
    }
  }
  if (args.backend === 'kiln' && names.includes('ocr_det')) {
    for (const threads of args.threads) {
      log(`image sizes: ocr_det on images of changing sizes, ${threads} thread(s) ` +
          '(bench/reshape_bench.mjs --model ocr_det)');
      parts.push(imageSizesTable(args, threads));
    }
  }
  if (args.backend === 'kiln' && names.includes('gpt_decode')) {
    for (const threads of args.threads) {
      log(`decode loop: gpt_decode, a new past length each step, ${threads} thread(s) ` +
          '(bench/decode_loop_bench.mjs)');
      parts.push(decodeLoopTable(args, threads));
    }
  }
  if (args.backend === 'kiln') {
    for (const threads of args.threads) {
      log(`patterns: models spelling out what the importer rewrites, ${threads} thread(s) ` +
          '(bench/pattern_bench.mjs)');
      parts.push(patternTable(args, threads));
    }
  }
  const paused = ['squeezenet1_1', 'ocr_rec', 'gpt_prefill'].filter((n) => names.includes(n));
  const most = Math.max(...args.threads);
  if (args.backend === 'kiln' && paused.length && most > 1) {
    log(`calls with pauses: ${paused.join(', ')}, ${most} thread(s) (bench/pause_bench.mjs)`);
    parts.push(pauseTable(args, most, paused));
  }
  for (const gpt of ['gpt', 'gpt_large']) {
    if (args.backend !== 'kiln' || ![`${gpt}_prefill`, `${gpt}_decode`].every((n) => names.includes(n))) {
      continue;
    }
    log(`memory: ${gpt} prefill + decode (bench/memory_bench.mjs)`);
    parts.push(memoryTable(args, gpt));
  }
  const text = parts.join('\n\n');
  console.log(text);
  log('done');
  if (args.results) {
    const versions = { kiln: kilnVersion(args), onnxruntime: ortVersion };
    writeFileSync(args.results,
                  resultsMarkdown(text, args, machine(root), versions, loadAtStart));
    const relative = path.relative(process.cwd(), args.results);
    log(`wrote ${relative.startsWith('..') ? args.results : relative}`);
  }
  process.exit(failures.length ? 1 : 0);
}

// The table another benchmark script of bench/ prints, under `title` (its command line).
function scriptTable(script, flags, title) {
  const ran = spawnSync(process.execPath,
                        [path.join(path.dirname(fileURLToPath(import.meta.url)), script), ...flags],
                        { encoding: 'utf8', timeout: 600_000 });
  const body = ran.status === 0 ? ran.stdout.trim() : `${script} failed: ${firstLine(ran)}`;
  return `### ${title}\n\n${body}`;
}

// bench/reshape_bench.mjs's table (GPT prefill at changing lengths: per-shape plans, one
// shape-generic plan, ONNX Runtime).
function reshapeTable(args, threads) {
  return scriptTable('reshape_bench.mjs',
                     ['--models', args.models, '--kiln', args.kiln, '--threads', String(threads)],
                     `Frequent reshapes, ${threads} thread(s) ` +
                     `(\`bench/reshape_bench.mjs --threads ${threads}\`)`);
}

// bench/reshape_bench.mjs's table for the OCR detector (images of changing sizes: a plan per
// size, kiln with expect_frequent_reshapes, ONNX Runtime; memory included).
function imageSizesTable(args, threads) {
  return scriptTable('reshape_bench.mjs',
                     ['--models', args.models, '--model', 'ocr_det', '--kiln', args.kiln,
                      '--threads', String(threads)],
                     `Changing image sizes, ${threads} thread(s) ` +
                     `(\`bench/reshape_bench.mjs --model ocr_det --threads ${threads}\`)`);
}

// bench/decode_loop_bench.mjs's table (GPT decode over a growing past: kiln with default options,
// with expect_frequent_reshapes, ONNX Runtime).
function decodeLoopTable(args, threads) {
  return scriptTable('decode_loop_bench.mjs',
                     ['--models', args.models, '--kiln', args.kiln, '--threads', String(threads)],
                     `A decoder's loop, ${threads} thread(s) ` +
                     `(\`bench/decode_loop_bench.mjs --threads ${threads}\`)`);
}

// bench/pattern_bench.mjs's table (layer norm spelled out, Conv + BatchNormalization: kiln with
// its rewrites, kiln with the graph as written, ONNX Runtime).
function patternTable(args, threads) {
  return scriptTable('pattern_bench.mjs',
                     ['--models', args.models, '--kiln', args.kiln, '--threads', String(threads)],
                     `Patterns the importer rewrites, ${threads} thread(s) ` +
                     `(\`bench/pattern_bench.mjs --threads ${threads}\`)`);
}

// bench/pause_bench.mjs's table (runs back to back and after 30 ms pauses, kiln and ONNX
// Runtime).
function pauseTable(args, threads, models) {
  return scriptTable('pause_bench.mjs',
                     ['--models', args.models, '--kiln', args.kiln, '--threads', String(threads),
                      '--only', models.join(',')],
                     `A model called now and then, ${threads} thread(s) ` +
                     `(\`bench/pause_bench.mjs --threads ${threads}\`)`);
}

// bench/memory_bench.mjs's table (one multifunction program vs two ONNX Runtime sessions).
function memoryTable(args, gpt) {
  return scriptTable('memory_bench.mjs',
                     ['--models', args.models, '--kiln', args.kiln, '--runs', '3', '--gpt', gpt],
                     `Memory: ${gpt} prefill + decode in one process ` +
                     `(\`bench/memory_bench.mjs --gpt ${gpt}\`)`);
}

main();
