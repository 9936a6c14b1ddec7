#!/usr/bin/env node
// ONNX Runtime's side of bench/memory_bench.mjs: one ONNX Runtime session per model (CPU,
// graph optimizations 'all', 1 thread), each run once on its inputs, in one process. Prints
// {"peak": MiB, "growth": MiB}: the peak RSS, and its growth over the RSS measured after
// onnxruntime-node was loaded and before the first session.
//
//   node bench/memory_ort.mjs '[{"onnx": FILE, "inputs": [{"name", "file"}...]}...]'

import { createRequire } from 'node:module';

import { readNpy } from './npy.mjs';

const require = createRequire(import.meta.url);

async function main() {
  const models = JSON.parse(process.argv[2] ?? '[]');
  const ort = require('onnxruntime-node');
  const feeds = models.map(({ inputs }) => Object.fromEntries(inputs.map(({ name, file }) => {
    const array = readNpy(file);
    return [name, new ort.Tensor(array.type, array.data, array.shape)];
  })));
  const options = {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all',
    intraOpNumThreads: 1, interOpNumThreads: 1,
  };
  const before = process.memoryUsage().rss;
  const sessions = [];
  for (const { onnx } of models) sessions.push(await ort.InferenceSession.create(onnx, options));
  for (let i = 0; i < sessions.length; ++i) await sessions[i].run(feeds[i]);
  const peak = process.resourceUsage().maxRSS * 1024;  // KiB on Linux
  const mib = (bytes) => bytes / (1 << 20);
  console.log(JSON.stringify({ peak: mib(peak), growth: mib(Math.max(0, peak - before)) }));
}

main().catch((error) => {
  console.error(`memory_ort: error: ${error.message}`);
  process.exit(1);
});
