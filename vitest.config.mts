import { defineConfig } from 'vitest/config';

// Three lanes: `unit` needs nothing running; `integration` and `faults` run against the lab
// (`npm run lab:up`) and share its guests, so they run one file at a time.
export default defineConfig({
  test: {
    // One file at a time across all lanes: the integration and fault tests share the lab's guests,
    // and the fault suite kills libvirtd, the OSD and the Temporal server on purpose.
    fileParallelism: false,
    maxWorkers: 1,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // One workflow bundle for the replay test and the workflow tests (test/setup/workflow-bundle.ts).
          globalSetup: ['test/setup/workflow-bundle.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          setupFiles: ['test/setup/retire-hosts.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          sequence: { concurrent: false },
        },
      },
      {
        test: {
          name: 'faults',
          include: ['test/faults/**/*.test.ts'],
          setupFiles: ['test/setup/retire-hosts.ts'],
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
          sequence: { concurrent: false },
        },
      },
    ],
  },
});
