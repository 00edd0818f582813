import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The lab's `.lab/env` as a flat map (keys exactly as written by `npm run lab:up`). */
export function labVars(dir = path.resolve(__dirname, '../../.lab')): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path.join(dir, 'env'), 'utf8');
  } catch {
    throw new Error('the lab is not up: run `npm run lab:up` first');
  }
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (!m) continue;
    let v = m[2];
    if ((v.startsWith("'") && v.endsWith("'")) || (v.startsWith('"') && v.endsWith('"'))) v = v.slice(1, -1);
    out[m[1]] = v;
  }
  return out;
}

export function need(vars: Record<string, string>, key: string): string {
  const v = vars[key];
  if (!v) throw new Error(`.lab/env lacks ${key}: is the lab fully up?`);
  return v;
}

/** A lab hypervisor host's connection (lab/libvirt.sh): host A is the one every test used before B. */
export interface LabHostVars {
  /** Host id for its worker: task queue `vmsnap-<name>`. */
  name: string;
  uri: string;
  statusDir?: string;
}

export function labHost(vars: Record<string, string>, host: 'a' | 'b'): LabHostVars {
  return host === 'a'
    ? { name: vars.VMSNAP_LAB_HOST_A ?? 'hv-a', uri: need(vars, 'LIBVIRT_DEFAULT_URI'), statusDir: vars.VMSNAP_LIBVIRT_STATUS_DIR }
    : { name: need(vars, 'VMSNAP_LAB_HOST_B'), uri: need(vars, 'LIBVIRT_B_URI'), statusDir: vars.VMSNAP_LIBVIRT_B_STATUS_DIR };
}

/** Environment for a `vmsnap worker` process on a lab host (WorkerProcess's extraEnv). */
export function labHostWorkerEnv(vars: Record<string, string>, host: 'a' | 'b'): Record<string, string> {
  const h = labHost(vars, host);
  return { VMSNAP_LIBVIRT_URI: h.uri, ...(h.statusDir ? { VMSNAP_LIBVIRT_STATUS_DIR: h.statusDir } : {}) };
}
