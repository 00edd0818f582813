/*
 * Edits of a domain XML as libvirt writes it (virDomainGetXMLDesc), done on the text so that
 * everything vmsnap does not mean to change stays byte for byte as libvirt wrote it. Pure.
 */

const SOURCE_TAG = /<source\b[^>]*>/g;
const ATTR = (name: string) => new RegExp(`(\\s${name}=)(['"])([^'"]*)\\2`);

/** Replaces the `name` of every RBD `<source protocol='rbd' name='pool/image'>` found in `map`. */
export function swapRbdSources(xml: string, map: ReadonlyMap<string, string>): string {
  return xml.replace(SOURCE_TAG, (tag) => {
    if (!/\sprotocol=(['"])rbd\1/.test(tag)) return tag;
    return tag.replace(ATTR('name'), (whole, pre: string, q: string, value: string) => {
      const to = map.get(value);
      return to === undefined ? whole : `${pre}${q}${escapeAttr(to)}${q}`;
    });
  });
}

/** The RBD `pool/image` names the XML's disks use, in document order. */
export function rbdSourceNames(xml: string): string[] {
  const out: string[] = [];
  for (const tag of xml.match(SOURCE_TAG) ?? []) {
    if (!/\sprotocol=(['"])rbd\1/.test(tag)) continue;
    const m = ATTR('name').exec(tag);
    if (m) out.push(m[3]);
  }
  return out;
}

/** Where a disk's RBD image is reached from this host: a ceph.conf, and the cephx user with its libvirt secret. */
export interface RbdSite {
  conf: string;
  authUser: string;
  secretUuid: string;
}

/**
 * Every RBD `<source>` whose `pool/image` is in `names` gets its cluster from `site`: its
 * `<host>`, `<config>` and `<auth>` children are replaced by the site's `<config file>` and
 * `<auth>` (dr-restore: the disks live on the DR cluster, not on the one the VM was recorded on).
 */
export function pointRbdSourcesAt(xml: string, names: ReadonlySet<string>, site: RbdSite): string {
  // An open <source ...> (not a self-closing one) up to its </source>: RBD sources have children.
  return xml.replace(/<source\b(?:[^>]*[^/>])?>[\s\S]*?<\/source>/g, (block) => {
    const tag = /^<source\b[^>]*>/.exec(block)![0];
    if (!/\sprotocol=(['"])rbd\1/.test(tag)) return block;
    const name = ATTR('name').exec(tag)?.[3];
    if (name === undefined || !names.has(name)) return block;
    const indent = /\n([ \t]*)<(?:host|config|auth)\b/.exec(block)?.[1] ?? '';
    const nl = indent ? `\n${indent}` : '';
    const inner = block
      .slice(tag.length, -'</source>'.length)
      .replace(/\s*<host\b[^>]*\/>/g, '')
      .replace(/\s*<host\b[^>]*>[\s\S]*?<\/host>/g, '')
      .replace(/\s*<config\b[^>]*\/>/g, '')
      .replace(/\s*<auth\b[\s\S]*?<\/auth>/g, '');
    const site_ =
      `${nl}<config file='${escapeAttr(site.conf)}'/>` +
      `${nl}<auth username='${escapeAttr(site.authUser)}'><secret type='ceph' uuid='${escapeAttr(site.secretUuid)}'/></auth>`;
    return `${tag}${site_}${inner}</source>`;
  });
}

export interface NewDomainEdits {
  name: string;
  uuid: string;
  /** Old `pool/image` → new `pool/image`. */
  disks: ReadonlyMap<string, string>;
  /** No network interfaces at all: a copy that must not talk to anything (`vmsnap verify`). */
  isolate?: boolean;
}

/**
 * A definition for a new VM made from another's: new name and UUID, no MAC addresses (libvirt
 * generates new ones), disks swapped, and every host file path of a character device (serial
 * and console logs, unix sockets of channels, chardev logs) moved to `<dir>/<name>.<file>`, so
 * the new VM never truncates the original's console log or steals its sockets.
 */
export function rewriteForNewDomain(xml: string, e: NewDomainEdits): string {
  let out = replaceFirstElementText(xml, 'name', e.name);
  out = replaceFirstElementText(out, 'uuid', e.uuid);
  out = out.replace(/[ \t]*<mac\s+address=(['"])[^'"]*\1\s*\/>\s*\n?/g, '');
  out = swapRbdSources(out, e.disks);
  if (e.isolate) out = withoutInterfaces(out);
  out = out.replace(/<(source|log)\b[^>]*>/g, (tag) =>
    tag.replace(ATTR(tag.startsWith('<log') ? 'file' : 'path'), (_w, pre: string, q: string, p: string) => `${pre}${q}${escapeAttr(renamePath(p, e.name))}${q}`),
  );
  return out;
}

/** Every `<interface>` element removed (with its line when it has one of its own). */
export function withoutInterfaces(xml: string): string {
  return xml.replace(/[ \t]*<interface\b[^>]*?(?:\/>|>[\s\S]*?<\/interface>)[ \t]*\n?/g, '');
}

function renamePath(p: string, name: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? `${name}.${p}` : `${p.slice(0, i + 1)}${name}.${p.slice(i + 1)}`;
}

function replaceFirstElementText(xml: string, element: string, text: string): string {
  const re = new RegExp(`<${element}>[^<]*</${element}>`);
  if (!re.test(xml)) throw new Error(`domain XML has no <${element}>`);
  return xml.replace(re, `<${element}>${escapeText(text)}</${element}>`);
}

function escapeAttr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/'/g, '&apos;').replace(/"/g, '&quot;');
}

function escapeText(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
}
