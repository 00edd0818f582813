import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * vmsnap's custom search attributes, registered by the lab (`temporal server start-dev
 * --search-attribute`) and by `vmsnap setup` (or `vmsnap doctor --fix`) on a real cluster. They make "every snapshot
 * of vm-42 that was not quiesced" one filter in the Web UI:
 *   VmsnapDomain = "vm-42" AND VmsnapQuiesced = false
 */
export const SA = {
  domain: defineSearchAttributeKey('VmsnapDomain', SearchAttributeType.KEYWORD),
  host: defineSearchAttributeKey('VmsnapHost', SearchAttributeType.KEYWORD),
  phase: defineSearchAttributeKey('VmsnapPhase', SearchAttributeType.KEYWORD),
  quiesced: defineSearchAttributeKey('VmsnapQuiesced', SearchAttributeType.BOOL),
  result: defineSearchAttributeKey('VmsnapResult', SearchAttributeType.KEYWORD),
  /** A host entry's index (src/model/fleet-index.ts): `n:<name>` / `h:<hash>` and `u:<uuid>` of every domain defined there. */
  domains: defineSearchAttributeKey('VmsnapDomains', SearchAttributeType.KEYWORD_LIST),
  /** A host entry's state: alive, late, draining, lost. */
  hostState: defineSearchAttributeKey('VmsnapHostState', SearchAttributeType.KEYWORD),
} as const;

export const SEARCH_ATTRIBUTE_TYPES: Record<string, 'Keyword' | 'Bool' | 'KeywordList'> = {
  VmsnapDomain: 'Keyword',
  VmsnapHost: 'Keyword',
  VmsnapPhase: 'Keyword',
  VmsnapQuiesced: 'Bool',
  VmsnapResult: 'Keyword',
  VmsnapDomains: 'KeywordList',
  VmsnapHostState: 'Keyword',
};
