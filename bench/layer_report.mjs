// Throughput of the Conv and MatMul layers as a share of the CPU's FMA peak: the layers inside
// the bench's models (`kiln bench --profile`) and single layers (kiln_cpu_bench).

import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

/** The path of kiln_cpu_bench (built with libbenchmark-dev) next to the kiln tool at `kiln`. */
function cpuBench(kiln) {
  return path.join(path.dirname(path.dirname(path.dirname(kiln))), 'kiln', 'engine', 'cpu',
                   'kiln_cpu_bench');
}

/** One core's FMA peak in GFLOP/s, measured now by kiln_cpu_bench's BM_FmaPeak (independent
 * chains of multiply-adds on the widest vectors the CPU has: 16 with AVX-512, 12 with AVX2),
 * the yardstick of the layer tables; null
 * when kiln_cpu_bench is not built or fails. */
export function measurePeak(kiln) {
  const binary = cpuBench(kiln);
  if (!existsSync(binary)) return null;
  const ran = spawnSync(binary, ['--benchmark_filter=BM_FmaPeak', '--benchmark_min_time=0.2',
                                 '--benchmark_format=json'],
                        { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (ran.status !== 0) return null;
  const rate = JSON.parse(ran.stdout).benchmarks?.[0]?.['GFLOP/s'];
  return rate > 0 ? rate : null;
}

/** How the tables name the peak: measured, or absent. */
const peakLabel = (peak) => (peak ? `${peak.toFixed(0)} GFLOP/s` : 'not measured');

// A layer at this share of the peak or more counts as running near it.
const NEAR_PEAK = 0.8;

const percent = (x) => (Number.isFinite(x) ? `${(100 * x).toFixed(0)} %` : '-');

/** Sums the steps of a `kiln bench --profile --json` report that do Conv or MatMul work
 * (`total_flops` > 0): GFLOP per run, their ms per run, their share of the runs, GFLOP/s and
 * % of the peak of `threads` cores (`peakPerCore` GFLOP/s each; NaN shares when null), the share of their time in layers at 80 % of that peak or
 * more, and the layer of most time under it. */
export function layerSummary(report, threads, peakPerCore) {
  const runs = report.runs ?? report.run_ms?.length ?? 0;
  const runMs = (report.latency_ms?.mean ?? 0) * runs;
  const peak = (peakPerCore ?? NaN) * threads;
  let flops = 0;
  let ms = 0;
  let nearMs = 0;
  let worst = null;
  for (const step of report.profile ?? []) {
    if (!(step.total_flops > 0) || !(step.total_ms > 0)) continue;
    flops += step.total_flops;
    ms += step.total_ms;
    const rate = step.total_flops / step.total_ms * 1e-6 / peak;
    if (rate >= NEAR_PEAK) nearMs += step.total_ms;
    else if (!worst || step.total_ms > worst.ms) worst = { node: step.node, ms: step.total_ms, rate };
  }
  if (!(ms > 0) || !(runs > 0)) return null;
  return {
    gflopPerRun: flops / runs * 1e-9, msPerRun: ms / runs, share: runMs > 0 ? ms / runMs : 0,
    gflops: flops / ms * 1e-6, ofPeak: flops / ms * 1e-6 / peak, nearPeak: nearMs / ms,
    worst: worst && { node: worst.node, share: worst.ms / ms, ofPeak: worst.rate },
  };
}

/** The markdown table of the layers inside the models: `profiles` is a list of
 * { model, threads, report } (`report`: kiln bench --profile --json); `peak`: one core's FMA
 * peak (measurePeak). */
export function modelLayerTable(profiles, peak) {
  const lines = [
    '### Conv and MatMul layers inside the models (`kiln bench --profile`, warm cache, the ' +
        'faster of two processes)',
    '',
    `| model | threads | work (GFLOP/run) | their time (ms/run) | share of the run | GFLOP/s | ` +
        `% of FMA peak (${peakLabel(peak)} x threads) | time at >= 80 % of peak | ` +
        'most time under 80 %: layer (its share, % of peak) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const { model, threads, report } of profiles) {
    const s = layerSummary(report, threads, peak);
    if (!s) {
      lines.push(`| ${model} | ${threads} | - | - | - | - | - | - | no Conv or MatMul steps |`);
      continue;
    }
    const worst = s.worst
      ? `${s.worst.node} (${percent(s.worst.share)}, ${percent(s.worst.ofPeak)})` : '-';
    lines.push(`| ${model} | ${threads} | ${s.gflopPerRun.toFixed(4)} | ${s.msPerRun.toFixed(3)} | ` +
               `${percent(s.share)} | ${s.gflops.toFixed(1)} | ${percent(s.ofPeak)} | ` +
               `${percent(s.nearPeak)} | ${worst} |`);
  }
  lines.push('', 'Work counts 2 flops per multiply-add of the direct algorithm (Conv: every ' +
             'weight at every output pixel, padding included; MatMul and Gemm: 2 x M x K x N), ' +
             'so a Winograd Conv, which does fewer multiplications, can show more than 100 %. ' +
             'Times are the steps\' own (each timed, which adds a little), over the timed runs ' +
             'of the faster of two processes; the share is of the whole run\'s time. Small layers (a GPT ' +
             'decode\'s matrix-vector products, the VAD\'s) are bound by reading their weights, ' +
             'not by FMAs.');
  return lines.join('\n');
}

/** The single-layer table from kiln_cpu_bench (built with libbenchmark-dev) next to the kiln
 * tool at `kiln`, one thread, with `peak` (measurePeak) for the shares; null when it is absent. */
export function singleLayerTable(kiln, peak) {
  const binary = cpuBench(kiln);
  if (!existsSync(binary)) return null;
  const ran = spawnSync(binary, ['--benchmark_filter=BM_DnnlConv/.*/2|BM_DnnlMatMul',
                                 '--benchmark_min_time=0.2', '--benchmark_format=json'],
                        { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (ran.status !== 0) return `Layer throughput: kiln_cpu_bench failed (${ran.status}).`;
  const report = JSON.parse(ran.stdout);
  const lines = [
    '### Conv and MatMul layers, 1 thread (`kiln_cpu_bench`, activations in the op\'s own ' +
        'layout as inside a model)',
    '',
    `| layer | implementation | GFLOP/s | % of FMA peak (${peakLabel(peak)} per core) |`,
    '|---|---|---:|---:|',
  ];
  for (const b of report.benchmarks) {
    const [name, impl] = `${b.label}`.split(' | ');
    const rate = b['GFLOP/s'];
    lines.push(`| ${name.replace(' native', '')} | ${impl} | ${rate.toFixed(1)} | ` +
               `${percent(rate / (peak ?? NaN))} |`);
  }
  lines.push('', 'Rates use wall time; above 100 % means the layer outruns the FMA loop (for ' +
             'padded convs, oneDNN skips the zero padding).');
  return lines.join('\n');
}

/** The line that says where the peak comes from. */
export function peakNote(peak) {
  return peak
    ? `FMA peak: ${peak.toFixed(1)} GFLOP/s per core, measured in this run (\`kiln_cpu_bench ` +
      '--benchmark_filter=BM_FmaPeak\`: independent chains of multiply-adds on the widest ' +
      'vectors the CPU has, as many as its registers hold); the tables below share it per thread.'
    : 'FMA peak: not measured (kiln_cpu_bench is not built: it needs libbenchmark-dev).';
}
