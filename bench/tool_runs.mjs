// Shared by the benchmark scripts that drive the kiln tool and Node in child processes.

import { spawnSync } from 'node:child_process';
import path from 'node:path';

/** A `run(command, args, env)` that returns the child's stdout, or calls `fail(message)` with
 * its stderr when it exits non-zero (10 minute limit, 64 MiB of output). */
export function runner(fail) {
  return (command, commandArgs, env = {}) => {
    const result = spawnSync(command, commandArgs, {
      encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 26, env: { ...process.env, ...env },
    });
    if (result.status !== 0) {
      fail(`${path.basename(command)} ${commandArgs[0]} failed: ${result.stderr || result.error}`);
    }
    return result.stdout;
  };
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Parses `--name value` pairs of `argv` into a copy of `defaults`: each flag names a key of
 * `defaults`; a key whose default is a number takes a positive integer. `--models` is required
 * when `defaults` has it. Calls `fail(message)` on anything else. */
export function parseFlags(argv, defaults, fail) {
  const args = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    const key = flag.startsWith('--') ? flag.slice(2) : '';
    if (!Object.hasOwn(defaults, key)) fail(`unknown argument '${flag}'`);
    if (value === undefined) fail(`${flag} needs a value`);
    if (typeof defaults[key] === 'number') {
      args[key] = Number(value);
      if (!Number.isInteger(args[key]) || args[key] < 1) fail(`${flag} must be a positive integer`);
    } else {
      args[key] = value;
    }
  }
  if (Object.hasOwn(defaults, 'models') && !args.models) fail('--models DIR is required');
  return args;
}
