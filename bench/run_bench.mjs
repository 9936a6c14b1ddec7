#!/usr/bin/env node
// Speed of kiln against ONNX Runtime on the real-model set: `kiln bench` and bench_ort.mjs,
// each a fresh process, interleaved over several rounds; the medians go into a table.
//
//   node bench/run_bench.mjs [--models DIR] [--kiln PATH] [--work DIR] [--threads 1,2]
//                            [--runs N] [--rounds N] [--only a,b] [--results FILE|-]
//
// For each model of DIR/models.json (its first input case): export it with
// `kiln export --backend portable`, write the case's seeded inputs (inputs.mjs, the same data
// as compare_ort.mjs), and calibrate: one short run of each side estimates its latency. Timed
// runs per process are then as many as fit in a few seconds, at least 3 and at most --runs
// (default 100), so slow models take fewer. Then, for each round (default 3), model and thread
// count, `kiln bench --json` and `bench_ort.mjs` run one after the other (the order alternates
// between rounds). Each cell of the table is the median over the rounds of each process's
// median latency, load time (kiln: program + method load) or session creation time (ORT).
// Prints the table and writes it, with the command, date and machine, to --results (default
// bench/RESULTS.md; '-' writes nothing). Exits 1 when any model failed.

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { caseInputs } from './inputs.mjs';
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
  console.error('usage: bench/run_bench.sh [--models DIR] [--kiln PATH] [--work DIR] ' +
                '[--threads 1,2] [--runs N] [--rounds N] [--only NAME,...] [--results FILE|-]');
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
    else if (flag === '--kiln') args.kiln = path.resolve(value);
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

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

function clamp(value, low, high) {
  return Math.min(Math.max(value, low), high);
}

function firstLine(result) {
  if (result.error) return result.error.message;
  if (result.signal) return `killed by ${result.signal}`;
  const lines = `${result.stderr}`.split('\n').filter((l) => l.trim());
  return lines.length ? lines[0].replace(/^kiln \w+: error: /, '') : `exit code ${result.status}`;
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
  const program = path.join(dir, `${name}.kiln`);
  const exported = spawnSync(args.kiln, ['export', model, '-o', program, '--backend', 'portable'],
                             { encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 26 });
  if (exported.status !== 0) throw new Error(`export failed: ${firstLine(exported)}`);
  return { name, caseName: kase.name, model, program, inputFlags };
}

function kilnBench(job, threads, plan, args) {
  return runJson(args.kiln, ['bench', job.program, ...job.inputFlags, '--threads', `${threads}`,
                             '--warmup', `${plan.kilnWarmup}`, '--runs', `${plan.kilnRuns}`,
                             '--json'], 'kiln bench');
}

function ortBench(job, threads, plan) {
  return runJson(process.execPath,
                 [path.join(here, 'bench_ort.mjs'), job.model, ...job.inputFlags,
                  '--threads', `${threads}`, '--warmup', `${plan.ortWarmup}`,
                  '--runs', `${plan.ortRuns}`, '--sessions', `${plan.sessions}`],
                 'bench_ort');
}

// One short process per side estimates the latency (and ORT's session time), so that slow
// models get fewer runs.
function calibrate(job, args) {
  const kiln = runJson(args.kiln, ['bench', job.program, ...job.inputFlags, '--warmup', '0',
                                   '--runs', '1', '--json'], 'kiln bench');
  const ort = ortBench(job, 1, { ortWarmup: 0, ortRuns: 1, sessions: 1 });
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

function format(ms) {
  if (ms >= 100) return ms.toFixed(0);
  if (ms >= 10) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(2);
  return ms.toFixed(3);
}

function ratio(x) {
  return x >= 10 ? x.toFixed(0) : x >= 1 ? x.toFixed(1) : x.toFixed(3);
}

function geomean(values) {
  return Math.exp(values.reduce((a, v) => a + Math.log(v), 0) / values.length);
}

function machine() {
  const run = (command, commandArgs) => {
    try {
      return execFileSync(command, commandArgs, { encoding: 'utf8', cwd: root }).trim();
    } catch {
      return '?';
    }
  };
  let cpu = '?';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) cpu = line.split(':')[1].trim();
  } catch {
    // not Linux: leave '?'
  }
  return { nproc: run('nproc', []), cpu, commit: run('git', ['rev-parse', '--short', 'HEAD']),
           load: os.loadavg()[0].toFixed(1) };
}

function table(rows, failures) {
  const lines = [
    '| model | threads | kiln latency (ms) | ORT latency (ms) | kiln/ORT | kiln load (ms) | ' +
      'ORT session (ms) | kiln/ORT | runs kiln/ORT |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(`| ${r.label} | ${r.threads} | ${format(r.kiln)} | ${format(r.ort)} | ` +
               `${ratio(r.kiln / r.ort)} | ${format(r.kilnLoad)} | ${format(r.ortSession)} | ` +
               `${ratio(r.kilnLoad / r.ortSession)} | ${r.runs} |`);
  }
  for (const [name, why] of failures) lines.push(`| ${name} | | ${why} | | | | | | |`);
  return lines.join('\n');
}

function summary(rows) {
  if (!rows.length) return 'no model measured';
  const latency = geomean(rows.map((r) => r.kiln / r.ort));
  const load = geomean(rows.map((r) => r.kilnLoad / r.ortSession));
  return `geometric mean of kiln/ORT over ${rows.length} rows: latency ${ratio(latency)}, ` +
         `load / session creation ${ratio(load)}`;
}

function resultsMarkdown(text, args, info, ortVersion, loadAtStart) {
  const command = process.env.RUN_BENCH_COMMAND || 'node bench/run_bench.mjs';
  return `<!-- Generated by bench/run_bench.sh; rerun it to refresh. -->
# kiln vs ONNX Runtime: speed

**What this measures.** kiln runs the programs exported with \`--backend portable\`: every op
on its *reference kernel* (plain loops written for clarity and exactness, single-threaded, no
SIMD, no fusion, no packing). ONNX Runtime ${ortVersion} runs with its optimized CPU kernels
and \`graphOptimizationLevel: 'all'\`. kiln is expected to be far slower here: these figures
are the baseline the optimized engine path (KilnBackend) will be measured against, not a
claim about it. \`--threads\` reaches ONNX Runtime (intra- and inter-op threads) but not kiln:
the portable program has no KilnBackend delegate, so kiln's rows for 2 threads rerun the same
single-threaded kernels.

- kiln latency: median over ${args.rounds} rounds of \`kiln bench --json\` \`latency_ms.median\`;
  kiln load: \`load_ms\` (program + method load, file mapped, in a fresh process). The
  export (\`kiln export\`, ahead of time) is not included, while ORT's session creation
  includes parsing the ONNX file and optimizing the graph: the load ratio compares what an
  application waits for at startup, not equal work.
- ORT latency: median over the rounds of \`bench/bench_ort.mjs\` latency medians; ORT session:
  median time to create an \`InferenceSession\` from the file (fresh sessions, fresh process).
- Each round runs every model and thread count, kiln and ORT back to back in fresh processes
  (the order alternates between rounds). "runs" is the timed runs per process; slow models get
  fewer (calibrated from one short run of each side, at least 3).
- Inputs: the first case of each model in \`models.json\` (seeded, the data
  \`bench/compare.sh\` checks for equal outputs).

- Command: \`${command}\`
- Date: ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}
- Machine: ${info.nproc} CPUs (\`nproc\`), ${info.cpu}; kiln commit ${info.commit}
- Load average (1 min) at start and end: ${loadAtStart}, ${info.load} (other processes on
  the machine add noise; with the cores busy, 2 threads can be slower than 1)

${text}
`;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifestPath = path.join(args.models, 'models.json');
  if (!existsSync(manifestPath)) {
    usage(`no ${manifestPath}; make the models with bench/compare.sh or ` +
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
  for (const name of names) {
    const entry = manifest.models[name];
    try {
      if (!entry) throw new Error(`not in ${manifestPath}`);
      const job = prepareModel(name, entry, manifest, args);
      job.plan = calibrate(job, args);
      job.results = new Map(args.threads.map((t) => [t, { kiln: [], ort: [] }]));
      jobs.push(job);
      log(`${name}: exported; kiln ${job.plan.kilnRuns} runs, ORT ${job.plan.ortRuns} runs`);
    } catch (error) {
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
        try {
          const sides = [() => cell.kiln.push(kilnBench(job, threads, job.plan, args)),
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
            `${format(cell.kiln.at(-1).latency_ms.median)} ms, ORT ` +
            `${format(cell.ort.at(-1).latency_ms.median)} ms`);
      }
    }
  }

  const rows = [];
  for (const job of jobs) {
    if (job.failed) continue;
    for (const threads of args.threads) {
      const { kiln, ort } = job.results.get(threads);
      rows.push({
        label: job.caseName === 'default' ? job.name : `${job.name} (${job.caseName})`,
        threads,
        kiln: median(kiln.map((r) => r.latency_ms.median)),
        ort: median(ort.map((r) => r.latency_ms.median)),
        kilnLoad: median(kiln.map((r) => r.load_ms)),
        ortSession: median(ort.map((r) => r.session_ms.median)),
        runs: `${job.plan.kilnRuns}/${job.plan.ortRuns}`,
      });
    }
  }
  const text = `${table(rows, failures)}\n\n${summary(rows)}`;
  console.log(text);
  log('done');
  if (args.results) {
    writeFileSync(args.results, resultsMarkdown(text, args, machine(), ortVersion, loadAtStart));
    const relative = path.relative(process.cwd(), args.results);
    log(`wrote ${relative.startsWith('..') ? args.results : relative}`);
  }
  process.exit(failures.length ? 1 : 0);
}

main();
