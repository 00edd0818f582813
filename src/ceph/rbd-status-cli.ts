import { execFile } from 'node:child_process';
import type { OmapCliOptions } from './omap-cli';

/*
 * `rbd status --format json`: the watchers of an image, i.e. the clients (a QEMU among them) that
 * have it open. Through the CLI, bounded and killed at its deadline like the omap calls: the addon
 * has no watcher listing, and this is asked rarely (a hand-off proving a guest runs nowhere).
 */
export async function imageWatchers(o: OmapCliOptions, d: { pool: string; image: string; namespace?: string }): Promise<string[]> {
  const argv: string[] = [];
  if (o.conf) argv.push('-c', o.conf);
  if (o.id) argv.push('--id', o.id);
  if (o.keyring) argv.push('--keyring', o.keyring);
  argv.push('--format', 'json', 'status', '--pool', d.pool, ...(d.namespace ? ['--namespace', d.namespace] : []), '--image', d.image);
  return new Promise((resolve, reject) => {
    execFile('rbd', argv, { timeout: o.timeoutMs ?? 10_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err) {
        // A removed image has no watchers: nothing holds it open.
        if (/\(2\) No such file or directory|error opening image .*: \(2\)/.test(stderr)) return resolve([]);
        return reject(new Error(`rbd status ${d.pool}/${d.image}: ${stderr.trim() || err.message}`));
      }
      try {
        const v = JSON.parse(stdout) as { watchers?: { address?: string }[] };
        resolve((v.watchers ?? []).map((w) => w.address ?? '?'));
      } catch (e) {
        reject(new Error(`rbd status ${d.pool}/${d.image}: unreadable output (${String(e)})`));
      }
    });
  });
}
