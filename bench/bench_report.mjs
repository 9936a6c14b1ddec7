// The report of run_bench.mjs: the table of medians and ratios, the summary against the speed
// targets, and RESULTS.md with the command, date, machine and versions.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** The speed targets (kiln / ONNX Runtime) the summary checks each row against. */
export const TARGETS = {
  latency: 1.0,         // every row
  latencyGeomean: 0.9,  // geometric mean over the rows
  warmLoad: 0.15,       // warm load (cache hit, fresh process) / ORT's first session (fresh process)
  coldLoad: 1.0,        // cold load (specialize and store) / ORT's first session (fresh process)
};

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

export function geomean(values) {
  return Math.exp(values.reduce((a, v) => a + Math.log(v), 0) / values.length);
}

/** Milliseconds with 3 or 4 significant digits. */
export function format(ms) {
  if (ms >= 100) return ms.toFixed(0);
  if (ms >= 10) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(2);
  return ms.toFixed(3);
}

export function ratio(x) {
  return x >= 10 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(3);
}

/** A target as text: 1 as "1.0", 0.15 as "0.15". */
function limit(x) {
  return Number.isInteger(x) ? x.toFixed(1) : `${x}`;
}

/** The distinct values of `values`, joined ("hit", or "miss, hit" when they differ). */
function distinct(values) {
  return [...new Set(values)].join(', ');
}

/**
 * One row of the table from the records of one model and thread count: `cold` the kiln bench
 * processes that each had a fresh cache directory of their own, `kiln` and `ort` the processes
 * of the rounds (kiln's warm loads).
 */
export function makeRow(job, threads, cold, kiln, ort) {
  return {
    label: job.caseName === 'default' ? job.name : `${job.name} (${job.caseName})`,
    threads,
    kiln: median(kiln.map((r) => r.latency_ms.median)),
    ort: median(ort.map((r) => r.latency_ms.median)),
    cold: median(cold.map((r) => r.load_ms)),
    warm: median(kiln.map((r) => r.load_ms)),
    // kiln's loads after the first in the same process (`--later-loads`), when measured.
    later: median(kiln.map((r) => r.later_loads_ms?.median ?? NaN)),
    session: median(ort.map((r) => r.first_session_ms)),
    laterSession: median(ort.map((r) => r.later_sessions_ms?.median ?? r.session_ms.median)),
    kilnFirst: median(kiln.map((r) => r.first_run_ms)),
    ortFirst: median(ort.map((r) => r.first_run_ms)),
    cacheCold: distinct(cold.map((r) => r.cache)),
    cacheWarm: distinct(kiln.map((r) => r.cache)),
    threadsApplied: [...cold, ...kiln].every((r) => r.threads_applied),
    runs: `${job.plan.kilnRuns}/${job.plan.ortRuns}`,
  };
}

export function table(rows, failures) {
  const lines = [
    '| model | threads | kiln latency (ms) | ORT latency (ms) | kiln/ORT | kiln cold load (ms) | ' +
      'kiln warm load first / later (ms) | ORT session first / later (ms) | cold/ORT | ' +
      'warm/ORT | later/ORT later | first run kiln / ORT (ms) | ready/ORT | cache cold / warm | ' +
      'runs kiln/ORT |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|',
  ];
  for (const r of rows) {
    const threads = r.threadsApplied ? `${r.threads}` : `${r.threads}*`;
    lines.push(`| ${r.label} | ${threads} | ${format(r.kiln)} | ${format(r.ort)} | ` +
               `${ratio(r.kiln / r.ort)} | ${format(r.cold)} | ` +
               `${format(r.warm)} / ${orDash(r.later, format)} | ` +
               `${format(r.session)} / ${format(r.laterSession)} | ` +
               `${ratio(r.cold / r.session)} | ${ratio(r.warm / r.session)} | ` +
               `${orDash(r.later / r.laterSession, ratio)} | ` +
               `${format(r.kilnFirst)} / ${format(r.ortFirst)} | ` +
               `${ratio(ready(r))} | ${r.cacheCold} / ${r.cacheWarm} | ${r.runs} |`);
  }
  for (const [name, why] of failures) lines.push(`| ${name} | | ${why} |${' |'.repeat(12)}`);
  return lines.join('\n');
}

/** `show(x)`, or "-" when x was not measured (NaN). */
function orDash(x, show) {
  return Number.isNaN(x) ? '-' : show(x);
}

/** Warm load + first run over ORT's first session + first run: the time until the first
 * result of a fresh process (a function of symbolic inputs is specialized in its first run). */
function ready(r) {
  return (r.warm + r.kilnFirst) / (r.session + r.ortFirst);
}

// The time to a specialized model, ready to run at full speed, in a fresh process: the warm
// load plus what the first run takes over a later one (a function of symbolic inputs is
// specialized there), against ORT's first session plus the same for ORT.
function settled(r) {
  return (r.warm + Math.max(r.kilnFirst - r.kiln, 0)) /
    (r.session + Math.max(r.ortFirst - r.ort, 0));
}

function within(rows, value, limit) {
  return `${rows.filter((r) => value(r) <= limit).length} of ${rows.length} rows`;
}

/** The geometric means and, per target, how many rows meet it. */
export function summary(rows, backend) {
  if (!rows.length) return 'no model measured';
  const latency = geomean(rows.map((r) => r.kiln / r.ort));
  const cold = geomean(rows.map((r) => r.cold / r.session));
  const warm = geomean(rows.map((r) => r.warm / r.session));
  const lines = [
    `- latency kiln/ORT: geometric mean ${ratio(latency)} over ${rows.length} rows ` +
      `(target <= ${limit(TARGETS.latencyGeomean)}); <= ${limit(TARGETS.latency)} in ` +
      `${within(rows, (r) => r.kiln / r.ort, TARGETS.latency)}`,
    `- warm load / ORT's first session: geometric mean ${ratio(warm)}; <= ` +
      `${limit(TARGETS.warmLoad)} in ${within(rows, (r) => r.warm / r.session, TARGETS.warmLoad)}`,
    `- cold load / ORT's first session: geometric mean ${ratio(cold)}; <= ` +
      `${limit(TARGETS.coldLoad)} in ${within(rows, (r) => r.cold / r.session, TARGETS.coldLoad)}`,
  ];
  const measured = rows.filter((r) => !Number.isNaN(r.later));
  if (measured.length) {
    lines.push(`- later loads / ORT's later sessions (both in a process that has loaded the ` +
               `model once): geometric mean ` +
               `${ratio(geomean(measured.map((r) => r.later / r.laterSession)))}; <= ` +
               `${limit(TARGETS.warmLoad)} in ` +
               `${within(measured, (r) => r.later / r.laterSession, TARGETS.warmLoad)}`);
  }
  lines.push(`- a fresh process's loads against ORT's later sessions (unlike for like: ORT's ` +
             `process is already warm): warm load geometric mean ` +
             `${ratio(geomean(rows.map((r) => r.warm / r.laterSession)))}, <= ` +
             `${limit(TARGETS.warmLoad)} in ` +
             `${within(rows, (r) => r.warm / r.laterSession, TARGETS.warmLoad)}; cold load ` +
             `geometric mean ${ratio(geomean(rows.map((r) => r.cold / r.laterSession)))}, <= ` +
             `${limit(TARGETS.coldLoad)} in ` +
             `${within(rows, (r) => r.cold / r.laterSession, TARGETS.coldLoad)}`);
  lines.push(`- ready (warm load + first run) / (ORT's first session + first run): geometric mean ` +
             `${ratio(geomean(rows.map(ready)))}; <= 1.0 in ${within(rows, ready, 1.0)}`);
  const over = rows.filter((r) => !(settled(r) <= TARGETS.warmLoad));
  lines.push(`- warm load with the specialization a first run does (symbolic inputs) counted: ` +
             `(warm load + first run - latency) / (ORT's first session + first run - latency): ` +
             `geometric mean ${ratio(geomean(rows.map(settled)))}; <= ${limit(TARGETS.warmLoad)} ` +
             `in ${within(rows, settled, TARGETS.warmLoad)}` +
             (over.length ? ` (over: ${over.map((r) => `${r.label} at ${r.threads} thread(s) ` +
                                                       `${ratio(settled(r))}`).join(', ')})` : ''));
  const notHit = rows.filter((r) => r.cacheWarm !== 'hit');
  if (backend === 'kiln' && notHit.length) {
    lines.push(`- ${notHit.length} of ${rows.length} rows' warm processes did not report a ` +
               `cache hit (cache: ${distinct(notHit.map((r) => r.cacheWarm))}): their functions ` +
               'have symbolic inputs, specialized in the first run of each shape (warm ' +
               'processes adopt the packed weights stored for that shape, then build the plan ' +
               'and kernels), so their "warm load" is not the warm load the target means: ' +
               '"ready" and the line above count that first run');
  }
  if (rows.some((r) => !r.threadsApplied)) {
    lines.push('- \\* threads not applied (`threads_applied: false`): the program has no ' +
               'KilnBackend delegate, its kernels run on the calling thread');
  }
  return lines.join('\n');
}

export function machine(root) {
  const run = (command, commandArgs) => {
    try {
      return execFileSync(command, commandArgs, { encoding: 'utf8', cwd: root }).trim();
    } catch {
      return '?';
    }
  };
  let cpu = '?';
  let cores = '?';
  try {
    // One block per logical CPU; a physical core is a distinct (physical id, core id).
    const blocks = readFileSync('/proc/cpuinfo', 'utf8').split('\n\n').filter((b) => b.trim());
    const field = (block, name) => block.split('\n').find((l) => l.startsWith(name))
      ?.split(':')[1].trim();
    cpu = field(blocks[0], 'model name') ?? '?';
    const ids = new Set(blocks.map((b) => `${field(b, 'physical id')}/${field(b, 'core id')}`));
    if (!ids.has('undefined/undefined')) cores = `${ids.size}`;
  } catch {
    // not Linux: leave '?'
  }
  const dirty = run('git', ['status', '--porcelain', '--untracked-files=no']);
  const commit = run('git', ['rev-parse', '--short', 'HEAD']) + (dirty && dirty !== '?' ?
    ' with local changes' : '');
  return { nproc: run('nproc', []), cpu, cores, commit, load: os.loadavg()[0].toFixed(1) };
}

function description(args) {
  if (args.backend === 'portable') {
    return `**What this measures.** kiln runs the programs exported with \`--backend portable\`:
every op on its *reference kernel* (plain loops written for exactness, single-threaded, no
SIMD, no fusion). kiln is expected to be far slower here: this is the baseline of the
reference kernels, not a claim about the engine. \`--threads\` does not reach the portable
kernels (rows marked \\*). There is no cache: "cold" is the median of the first process and one
more per round, "warm" the processes of the rounds.`;
  }
  return `**What this measures.** kiln runs the programs exported with \`--backend kiln\`: each
model as KilnBackend delegates compiled by the engine at load time (a model the engine cannot
take falls back to the reference kernels; its rows are marked \\*). \`--threads N\` becomes
\`KilnBackend.num_threads\`.

- Cold load: \`kiln bench\` processes each given a fresh, empty
  \`--option KilnBackend.cache_dir=DIR\` of its own (one before the rounds, one more in each
  round), median: \`load_ms\` includes specializing and storing.
- Warm load: \`load_ms\` of the later processes (one per round, fresh processes, the same
  cache directory), which should find the specialization stored.
- Later loads: each of those processes then loads the method as many times more as ORT's
  process creates later sessions, each by a new module with
  \`KilnBackend.share_multifunction_model=false\` (a whole load from the cache, nothing reused
  from the first but what the process has warmed: code, oneDNN's primitive cache), before its
  first run (\`kiln bench --later-loads N\`, \`later_loads_ms.median\`): the counterpart of
  ORT's later sessions.
- "cache cold / warm" is the \`cache\` field those processes reported (\`hit\`, \`miss\` or
  \`off\`), printed as reported.
- First run: \`first_run_ms\` of the warm processes (kiln) and of the session that runs (ORT),
  medians. A function of symbolic inputs (cache \`off\`) is specialized in its first run, so
  "ready" = (warm load + first run) / (ORT's first session + first run) is the time to a first
  result.`;
}

export function resultsMarkdown(text, args, info, versions, loadAtStart) {
  const command = process.env.RUN_BENCH_COMMAND || 'node bench/run_bench.mjs';
  return `<!-- Generated by bench/run_bench.sh; rerun it to refresh. -->
# kiln vs ONNX Runtime: speed

${description(args)}

- Peer: ONNX Runtime ${versions.onnxruntime}, CPU provider, \`graphOptimizationLevel: 'all'\`,
  intra- and inter-op threads = the row's thread count.
- kiln latency: median over ${args.rounds} rounds of \`kiln bench --json\` \`latency_ms.median\`;
  ORT latency: the same of \`bench/bench_ort.mjs\`. ORT session: time to create an
  \`InferenceSession\` from the ONNX file (it includes parsing and optimizing the graph),
  median over the rounds of "first": the first session of a fresh process, which is what
  kiln's load is measured against (\`load_ms\`: program + method load, the first in a fresh
  process; both pay their runtime's start-up and first touches of code and memory); and of
  "later": the median of the 2-4 sessions that process creates after it, in a process already
  warm, which kiln's later loads are measured against (ORT's first session takes several
  times its later ones). The export (\`kiln export\`, ahead of time) is not included.
- Each round runs every model and thread count, kiln and ORT back to back in fresh processes
  (the order alternates between rounds). "runs" is the timed runs per process; slow models get
  fewer (calibrated from one short run of each side, at least 3).
- Inputs: the first case of each model in \`models.json\` (seeded; GPT prefill over 128 tokens,
  decode after 128 past tokens), data that \`bench/compare.sh\` checks for equal outputs.
- Targets (kiln/ORT): latency <= ${limit(TARGETS.latency)} on every row, geometric mean ` +
    `<= ${limit(TARGETS.latencyGeomean)}; warm load <= ${limit(TARGETS.warmLoad)} x ORT ` +
    `session creation; cold load <= ${limit(TARGETS.coldLoad)} x.

- Command: \`${command}\`
- Date: ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}
- Machine: ${info.cpu}, ${info.cores} physical cores, ${info.nproc} CPUs available ` +
    `(\`nproc\`)
- Versions: kiln ${versions.kiln} (commit ${info.commit}), backend \`${args.backend}\`; ` +
    `ONNX Runtime ${versions.onnxruntime} (npm \`onnxruntime-node\`); Node ${process.version}
- Load average (1 min) at start and end: ${loadAtStart}, ${info.load} (other processes on
  the machine add noise; with the cores busy, 2 threads can be slower than 1)

${text}
`;
}
