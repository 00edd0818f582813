import { ApplicationFailure } from '@temporalio/common';
import type { LibvirtClient } from '../src/libvirt';
import { isNoDomain } from '../src/libvirt';
import { FailureType } from '../src/model/failures';
import { decodeRestorePoint } from '../src/model/restore-point';
import type { RestorePoint } from '../src/model/restore-point';
import { NO_SOURCE_VM, refusedDefinition, sourceVmPathsOf } from '../src/restore/definition-allow-list';
import type { SourceVmPaths } from '../src/restore/definition-allow-list';
import { verifyRestoreRecord } from '../src/restore/record-mac';
import type { ActivityDeps } from './deps';

/*
 * The restore side of the trust boundary (README "Trust boundary"): a record is acted on only
 * when its HMAC proves a worker wrote it, and a definition is defined only inside the allow-list
 * (src/restore/definition-allow-list.ts). Both checks run in planRestore, before anything is
 * created, and again right before the define (the metadata could change in between).
 */

/** The fleet's restore-record key, or a typed failure saying why there is none. */
export async function restoreKey(deps: ActivityDeps): Promise<Buffer> {
  try {
    return await deps.restoreRecordKey();
  } catch (err) {
    throw ApplicationFailure.nonRetryable(`restore records cannot be signed or checked: ${(err as Error).message}`, FailureType.PermissionDenied);
  }
}

/** The record `value` on `image`, only if a worker wrote it; else RestoreRecordUntrusted. */
export function trustedRecord(value: string | null | undefined, image: string, key: Buffer): RestorePoint {
  const trust = verifyRestoreRecord(value, key);
  const point = decodeRestorePoint(value);
  if (!trust.trusted || !point) {
    throw ApplicationFailure.nonRetryable(
      `the restore record on ${image} is not trusted: ${trust.trusted ? 'not a record this version reads' : trust.why}; nothing was created or defined`,
      FailureType.RestoreRecordUntrusted,
    );
  }
  return point;
}

/** DefinitionRefused unless `xml` is inside the allow-list. */
export async function requireAllowedDefinition(
  deps: ActivityDeps,
  lv: LibvirtClient,
  xml: string,
  source: { name: string; uuid: string },
  restoredDisks: ReadonlySet<string>,
): Promise<void> {
  const refused = refusedDefinition(xml, {
    restoredDisks,
    sourceVm: await sourceVmPaths(lv, source.uuid),
    ...(deps.restoreHostPaths ? { extraDirs: deps.restoreHostPaths } : {}),
    ...(deps.radosCli.conf ? { cephConf: deps.radosCli.conf } : {}),
  });
  if (refused.length) {
    throw ApplicationFailure.nonRetryable(
      `the recorded definition of ${source.name} is refused (${refused.join('; ')}); nothing was defined`,
      FailureType.DefinitionRefused,
    );
  }
}

/** The host paths of the source VM as libvirt defines it on this host now (by UUID), if it does. */
async function sourceVmPaths(lv: LibvirtClient, uuid: string): Promise<SourceVmPaths> {
  try {
    const dom = await lv.lookupDomainByUuid(uuid);
    return sourceVmPathsOf(await lv.getDomainXml(dom, { inactive: true }));
  } catch (err) {
    if (isNoDomain(err)) return NO_SOURCE_VM;
    throw err;
  }
}
