#!/usr/bin/env node
// Measures one model on ONNX Runtime (the peer of `kiln bench`): session creation time and
// latency, printed as one JSON object.
//
//   node bench/bench_ort.mjs MODEL.onnx [--input NAME=FILE.npy]... [--threads N] [--warmup N]
//                            [--runs N] [--sessions N] [--pause-ms N]
//
// Every model input must be given. Sessions use the CPU provider, graphOptimizationLevel 'all'
// and intraOpNumThreads = interOpNumThreads = N (default 1). `--sessions` fresh sessions are
// created and released one after another (creation timed: "session_ms" over all of them;
// "first_session_ms" the process's first, which, like a kiln load in a fresh process, also
// pays the runtime's start-up and first touches of its code and memory; "later_sessions_ms"
// the others, in a process already warm); one more is created
// for the runs: the first run is timed alone, then `--warmup` untimed and `--runs` timed runs
// (each after a sleep of `--pause-ms`, untimed, as `kiln bench --pause-ms`).
// As in `kiln bench`, an input given N times makes N input sets: each set's first call is
// timed in order ("input_sets": [{inputs: [{name, shape}], first_run_ms}]) and the runs cycle
// through the sets; inputs given more than once must be given equally often.
// Output fields: "model", "onnxruntime", "threads", "sessions", "session_ms" {median, min},
// "first_session_ms", "later_sessions_ms" {median, min} (with --sessions 2 or more),
// "first_run_ms", "warmup", "runs", "pause_ms", "latency_ms" {median, p90, min, mean}, "run_ms", and
// "input_sets" with several sets, "memory" {rss_before_mib (before the first session),
// peak_rss_mib, peak_growth_mib (the peak over that)}.
// Errors go to stderr with exit code 1 (2 for usage errors).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

import { readNpy } from './npy.mjs';

const require = createRequire(import.meta.url);

function fail(message, code = 1) {
  console.error(`bench_ort: error: ${message}`);
  process.exit(code);
}

// The process's peak RSS and its growth over `rssBefore` (bytes: the RSS before the first
// session), in MiB.
function memoryReport(rssBefore) {
  const peak = process.resourceUsage().maxRSS / 1024;  // maxRSS is in KiB
  const before = rssBefore / (1024 * 1024);
  return { rss_before_mib: before, peak_rss_mib: peak, peak_growth_mib: Math.max(0, peak - before) };
}

function usage(message) {
  if (message) console.error(`bench_ort: error: ${message}`);
  console.error('usage: node bench/bench_ort.mjs MODEL.onnx [--input NAME=FILE.npy]... ' +
                '[--threads N] [--warmup N] [--runs N] [--sessions N] [--pause-ms N]');
  process.exit(2);
}

function count(flag, text, min) {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    usage(`${flag} '${text}' (expected an integer >= ${min})`);
  }
  return value;
}

function parseArgs(argv) {
  const args = { model: '', inputs: [], threads: 1, warmup: 3, runs: 10, sessions: 5, pauseMs: 0 };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    if (flag === '-h' || flag === '--help') usage();
    if (!flag.startsWith('--')) {
      if (args.model) usage(`a second model '${flag}' (expected one)`);
      args.model = flag;
      continue;
    }
    const value = argv[++i];
    if (value === undefined) usage(`${flag} needs a value`);
    if (flag === '--input') {
      const eq = value.indexOf('=');
      if (eq <= 0 || eq + 1 === value.length) {
        usage(`--input '${value}' (expected NAME=FILE.npy)`);
      }
      args.inputs.push({ name: value.slice(0, eq), file: value.slice(eq + 1) });
    } else if (flag === '--threads') args.threads = count(flag, value, 1);
    else if (flag === '--warmup') args.warmup = count(flag, value, 0);
    else if (flag === '--runs') args.runs = count(flag, value, 1);
    else if (flag === '--pause-ms') args.pauseMs = count(flag, value, 0);
    else if (flag === '--sessions') args.sessions = count(flag, value, 1);
    else usage(`unknown argument '${flag}'`);
  }
  if (!args.model) usage('no model given');
  return args;
}

/** median, p90 (nearest rank), min and mean of `samples`, as `kiln bench` computes them. */
export function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const n = sorted.length;
  const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return {
    median,
    p90: sorted[Math.max(Math.ceil(0.9 * n), 1) - 1],
    min: sorted[0],
    mean: sorted.reduce((a, b) => a + b, 0) / n,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (error) {
    fail(`cannot load onnxruntime-node (${`${error.message}`.split('\n')[0]}); ` +
         'install it with scripts/install-bench-deps.sh');
  }
  const version = JSON.parse(readFileSync(require.resolve('onnxruntime-node/package.json'),
                                          'utf8')).version;
  const options = {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all',
    intraOpNumThreads: args.threads, interOpNumThreads: args.threads,
  };

  // Each input's tensors, in the order given; several make input sets.
  const given = new Map();
  for (const { name, file } of args.inputs) {
    let array;
    try {
      array = readNpy(file);
    } catch (error) {
      fail(`read input '${name}': ${error.message}`);
    }
    if (!given.has(name)) given.set(name, []);
    given.get(name).push(new ort.Tensor(array.type, array.data, array.shape));
  }
  let setCount = 1;
  let cycled = '';
  for (const [name, tensors] of given) {
    if (tensors.length === 1) continue;
    if (setCount !== 1 && tensors.length !== setCount) {
      fail(`input '${name}' is given ${tensors.length} times and input '${cycled}' ` +
           `${setCount} times (expected inputs given more than once to be given equally often)`);
    }
    setCount = tensors.length;
    if (!cycled) cycled = name;
  }
  const feedSets = [];
  for (let s = 0; s < setCount; ++s) {
    const feeds = {};
    for (const [name, tensors] of given) feeds[name] = tensors.length === 1 ? tensors[0] : tensors[s];
    feedSets.push(feeds);
  }
  const feeds = feedSets[0];

  const sessionMs = [];
  let session;
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i <= args.sessions; ++i) {
    const start = performance.now();
    try {
      session = await ort.InferenceSession.create(args.model, options);
    } catch (error) {
      fail(`create a session for '${args.model}': ${`${error.message}`.split('\n')[0]}`);
    }
    if (i === args.sessions) break;  // the last one runs, untimed
    sessionMs.push(performance.now() - start);
    await session.release();
  }
  const missing = session.inputNames.filter((name) => !feeds[name]);
  const unknown = Object.keys(feeds).filter((name) => !session.inputNames.includes(name));
  if (unknown.length) {
    fail(`model '${args.model}' has no input '${unknown[0]}' ` +
         `(expected one of ${session.inputNames.map((n) => `'${n}'`).join(', ')})`);
  }
  if (missing.length) {
    fail(`input '${missing[0]}' of model '${args.model}' is not given ` +
         '(expected --input NAME=FILE.npy for every input)');
  }

  const run = async (k) => {
    try {
      await session.run(feedSets[k % feedSets.length]);
    } catch (error) {
      fail(`run '${args.model}': ${`${error.message}`.split('\n')[0]}`);
    }
  };
  const inputSets = [];
  let start;
  for (let s = 0; s < feedSets.length; ++s) {
    start = performance.now();
    await run(s);
    inputSets.push({
      inputs: Object.entries(feedSets[s]).map(([name, t]) => ({ name, shape: t.dims })),
      first_run_ms: performance.now() - start,
    });
  }
  const firstRunMs = inputSets[0].first_run_ms;
  for (let i = 0; i < args.warmup; ++i) await run(i);
  const runMs = [];
  const pause = () => new Promise((resolve) => setTimeout(resolve, args.pauseMs));
  for (let i = 0; i < args.runs; ++i) {
    if (args.pauseMs > 0) await pause();
    start = performance.now();
    await run(i);
    runMs.push(performance.now() - start);
  }
  await session.release();

  const sessions = stats(sessionMs);
  const laterStats = (ms) => {
    const s = stats(ms);
    return { median: s.median, min: s.min };
  };
  console.log(JSON.stringify({
    model: args.model,
    onnxruntime: version,
    threads: args.threads,
    sessions: args.sessions,
    session_ms: { median: sessions.median, min: sessions.min },
    first_session_ms: sessionMs[0],
    ...(sessionMs.length > 1 ? { later_sessions_ms: laterStats(sessionMs.slice(1)) } : {}),
    first_run_ms: firstRunMs,
    warmup: args.warmup,
    runs: args.runs,
    pause_ms: args.pauseMs,
    latency_ms: stats(runMs),
    run_ms: runMs,
    ...(inputSets.length > 1 ? { input_sets: inputSets } : {}),
    memory: memoryReport(rssBefore),
  }, null, 2));
}

main();
