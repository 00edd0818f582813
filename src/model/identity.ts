import { IDENTITY_META, META } from './metadata-keys';

/*
 * Who made a thing, by identity rather than by name. A VM deleted and recreated under the same
 * name gets a new libvirt UUID; two Temporal namespaces (or two fleets on one Ceph cluster) share
 * pools but not workflow ids. vmsnap acts on an image or snapshot only when every recorded
 * identity matches its own; anything without the record (made before it existed) is left alone.
 */

/** Where a run lives: its Temporal namespace and the fleet (a configured id, or the Temporal cluster id). */
export interface RunScope {
  namespace: string;
  cluster: string;
}


/** The metadata an image made for `domainUuid` in `scope` carries. */
export function identityMetadata(domainUuid: string, scope: RunScope): Record<string, string> {
  return {
    [IDENTITY_META.domainUuid]: domainUuid,
    [IDENTITY_META.namespace]: scope.namespace,
    [IDENTITY_META.cluster]: scope.cluster,
  };
}

/** The image was made by a run of this scope (namespace and cluster both recorded and equal). */
export function inScope(meta: Readonly<Record<string, string>>, scope: RunScope): boolean {
  return meta[IDENTITY_META.namespace] === scope.namespace && meta[IDENTITY_META.cluster] === scope.cluster;
}

/**
 * Retention's test: the image is a snapshot of this very VM (by UUID, not name) made in this
 * scope. `domainUuid` undefined is a retry of an activity scheduled before UUIDs were recorded:
 * it may act only on images that carry no UUID either, matched by name as they were then.
 */
export function sameVm(
  meta: Readonly<Record<string, string>>,
  want: { domain: string; domainUuid?: string; scope?: RunScope },
): boolean {
  if (meta[META.domain] !== want.domain) return false;
  const recorded = meta[IDENTITY_META.domainUuid];
  if (want.domainUuid === undefined) return recorded === undefined;
  if (recorded !== want.domainUuid) return false;
  return want.scope === undefined || inScope(meta, want.scope);
}

export { IDENTITY_META } from './metadata-keys';
