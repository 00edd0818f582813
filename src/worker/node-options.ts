/**
 * The V8 flags the worker's process is started with (`deploy/vmsnap-worker.service` sets
 * `NODE_OPTIONS` to this; `test/unit/service-unit.test.ts` keeps the two equal, and the load
 * bench starts its worker with it).
 *
 * `--max-semi-space-size=1` (MiB): V8 grows each isolate's young generation up to 16 MiB per
 * semi-space under allocation, and the worker has three isolates (its main thread and the host and
 * fleet queues' workflow threads), all allocating hard at 50 runs in flight. Capped at 1 MiB, in
 * one run of `npm run bench -- --no-window --no-flatten --memory-ab` (bench/README.md): the
 * worker's peak RSS under the load test 451 → 374 MiB (0.83×), idle 295 → 258 MiB (0.88×), the
 * main isolate's heap 91 → 59 MiB, with no cost seen in the window, end-to-end time or throughput.
 * What it costs is more frequent, smaller young collections.
 */
export const WORKER_NODE_OPTIONS = '--max-semi-space-size=1';
