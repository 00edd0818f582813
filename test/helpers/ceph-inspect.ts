import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { need } from '../../support/lab/env';

const run = promisify(execFile);

/**
 * Independent observation of Ceph for assertions: the `rbd` CLI with the admin key, not the
 * product's binding, so a bug in the binding cannot hide a stray image or snapshot.
 */
export class CephView {
  constructor(private readonly vars: Record<string, string>) {}

  private args(...rest: string[]): string[] {
    return ['-c', need(this.vars, 'CEPH_CONF'), '--id', this.vars.CEPH_ID ?? 'admin', '--keyring', need(this.vars, 'CEPH_KEYRING'), ...rest];
  }

  async rbd(...rest: string[]): Promise<string> {
    const { stdout } = await run('rbd', this.args(...rest), { maxBuffer: 64 << 20 });
    return stdout;
  }

  async images(pool: string): Promise<string[]> {
    return JSON.parse(await this.rbd('ls', '--format', 'json', pool)) as string[];
  }

  async snaps(pool: string, image: string): Promise<string[]> {
    const list = JSON.parse(await this.rbd('snap', 'ls', '--all', '--format', 'json', `${pool}/${image}`)) as { name: string }[];
    return list.map((s) => s.name);
  }

  async meta(pool: string, image: string): Promise<Record<string, string>> {
    // `rbd image-meta list` prints nothing at all (not `{}`) for an image without metadata.
    const out = (await this.rbd('image-meta', 'list', '--format', 'json', `${pool}/${image}`)).trim();
    return out ? (JSON.parse(out) as Record<string, string>) : {};
  }

  async info(pool: string, image: string): Promise<{ size: number; parent?: unknown; features: string[] }> {
    return JSON.parse(await this.rbd('info', '--format', 'json', `${pool}/${image}`));
  }

  /** sha256 of an image or snapshot's full content, streamed through `rbd export`. */
  async sha256(spec: string): Promise<string> {
    const { spawn } = await import('node:child_process');
    const { createHash } = await import('node:crypto');
    return new Promise((resolve, reject) => {
      const h = createHash('sha256');
      const p = spawn('rbd', this.args('export', '--no-progress', spec, '-'), { stdio: ['ignore', 'pipe', 'pipe'] });
      p.stdout.on('data', (b: Buffer) => h.update(b));
      let err = '';
      p.stderr.on('data', (b: Buffer) => (err += b.toString()));
      p.on('close', (code) => (code === 0 ? resolve(h.digest('hex')) : reject(new Error(`rbd export ${spec}: ${err}`))));
    });
  }

  /** Everything vmsnap could have left: snapshots named vmsnap-* on sources, images in a pool. */
  async vmsnapSnaps(pool: string, image: string): Promise<string[]> {
    return (await this.snaps(pool, image)).filter((s) => s.startsWith('vmsnap-'));
  }

  /** Keys (`image@snap`) of vmsnap's snapshot owner records in a pool (omap of vmsnap.snap-owners). */
  async ownerRecordKeys(pool: string): Promise<string[]> {
    try {
      const { stdout } = await run('rados', this.args('-p', pool, 'listomapkeys', 'vmsnap.snap-owners'));
      return stdout.split('\n').filter(Boolean);
    } catch (err) {
      if (/No such file/.test((err as { stderr?: string }).stderr ?? '')) return [];
      throw err;
    }
  }

  /** Domain UUIDs with an open freeze obligation (src/model/freeze-obligation.ts). */
  async obligationKeys(pool = 'images'): Promise<string[]> {
    const { stdout } = await run('rados', this.args('-p', pool, 'listomapkeys', 'vmsnap.freeze-obligations')).catch(() => ({ stdout: '' }));
    return stdout.split('\n').map((s) => s.trim()).filter(Boolean);
  }

  async dropOwnerRecord(pool: string, key: string): Promise<void> {
    await run('rados', this.args('-p', pool, 'rmomapkey', 'vmsnap.snap-owners', key)).catch(() => undefined);
  }

  async removeImage(pool: string, image: string): Promise<void> {
    for (const s of await this.snaps(pool, image).catch(() => [] as string[])) {
      await this.rbd('snap', 'unprotect', `${pool}/${image}@${s}`).catch(() => undefined);
      await this.rbd('snap', 'rm', `${pool}/${image}@${s}`).catch(() => undefined);
    }
    await this.rbd('rm', '--no-progress', `${pool}/${image}`).catch(() => undefined);
  }

  /** Removes the images a run made (`pool/name` of each disk's `image`), with their snapshots. */
  async removeResultImages(result: { disks: { image?: string }[] } | undefined): Promise<void> {
    for (const d of result?.disks ?? []) {
      if (!d.image) continue;
      const [pool, name] = d.image.split('/') as [string, string];
      await this.removeImage(pool, name);
    }
  }
}
