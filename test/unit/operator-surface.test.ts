import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ServiceError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { hostMetrics } from '../../src/host/metrics';
import { NamespaceNotPreparedError, missingSearchAttributesIn } from '../../src/temporal-namespace';
import { VERSION } from '../../src/version';
import { vmsnapCli } from '../helpers/cli';

const pkg = JSON.parse(readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { version: string };

describe('what an operator sees first', () => {
  it('vmsnap --version prints the package version and exits 0', async () => {
    const r = await vmsnapCli(['--version'], { PATH: process.env.PATH });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`vmsnap ${pkg.version}\n`);
  });

  it('/metrics carries vmsnap_build_info{version,node} 1 from the first scrape', async () => {
    expect(VERSION).toBe(pkg.version);
    expect(await hostMetrics().render()).toContain(`vmsnap_build_info{version="${pkg.version}",node="${process.version}"} 1\n`);
  });

  it("the server's refusals of an unregistered search attribute are recognised, a user's own attribute is not ours", () => {
    // The texts the dev server (SQL visibility) answers, wrapped as the SDK wraps them.
    const start = new ServiceError('Failed to start Workflow', { cause: Object.assign(new Error('3 INVALID_ARGUMENT: Namespace default has no mapping defined for search attribute VmsnapDomain'), { details: 'Namespace default has no mapping defined for search attribute VmsnapDomain' }) });
    const list = new ServiceError('Failed to list workflows', { cause: new Error("3 INVALID_ARGUMENT: invalid query: invalid expression: column name 'VmsnapDomain' is not a valid search attribute") });
    expect(missingSearchAttributesIn(start)).toEqual(['VmsnapDomain']);
    expect(missingSearchAttributesIn(list)).toEqual(['VmsnapDomain']);
    expect(missingSearchAttributesIn(new Error("column name 'CustomerId' is not a valid search attribute"))).toBeUndefined();
    expect(missingSearchAttributesIn(new Error('14 UNAVAILABLE: connection refused'))).toBeUndefined();
    const line = new NamespaceNotPreparedError('default', ['VmsnapDomain']).message;
    expect(line).toMatch(/run `vmsnap setup`$/);
    expect(line).not.toContain('\n');
  });
});
