/**
 * A tolerant, dependency-free XML reader for libvirt's domain XML: elements, attributes, text,
 * entities, comments, CDATA and processing instructions. No namespaces, DTDs or validation;
 * libvirt writes plain, well-formed XML and we only read a few elements from it.
 */

export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return Number.isFinite(code) ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[ref.toLowerCase()] ?? whole;
  });
}

const ATTR_RE = /([^\s=/>]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;

/** Parses a document and returns its root element. Throws on input with no element at all. */
export function parseXml(xml: string): XmlElement {
  const root: XmlElement = { name: '#document', attrs: {}, children: [], text: '' };
  const stack: XmlElement[] = [root];
  let pos = 0;
  while (pos < xml.length) {
    const lt = xml.indexOf('<', pos);
    const top = stack[stack.length - 1];
    if (lt < 0) {
      top.text += decodeEntities(xml.slice(pos));
      break;
    }
    if (lt > pos) top.text += decodeEntities(xml.slice(pos, lt));
    if (xml.startsWith('<!--', lt)) {
      pos = skipPast(xml, lt, '-->');
    } else if (xml.startsWith('<![CDATA[', lt)) {
      const end = xml.indexOf(']]>', lt);
      top.text += xml.slice(lt + 9, end < 0 ? xml.length : end);
      pos = end < 0 ? xml.length : end + 3;
    } else if (xml.startsWith('<?', lt)) {
      pos = skipPast(xml, lt, '?>');
    } else if (xml.startsWith('<!', lt)) {
      pos = skipPast(xml, lt, '>');
    } else if (xml.startsWith('</', lt)) {
      const gt = xml.indexOf('>', lt);
      const name = xml.slice(lt + 2, gt < 0 ? xml.length : gt).trim();
      // Tolerate stray close tags: pop to the matching open element if there is one.
      const at = stack.map((e) => e.name).lastIndexOf(name);
      if (at > 0) stack.length = at;
      pos = gt < 0 ? xml.length : gt + 1;
    } else {
      const gt = findTagEnd(xml, lt);
      const body = xml.slice(lt + 1, gt);
      const selfClosing = body.endsWith('/');
      const inner = selfClosing ? body.slice(0, -1) : body;
      const name = /^[^\s/>]+/.exec(inner)?.[0] ?? '';
      const el: XmlElement = { name, attrs: {}, children: [], text: '' };
      for (const m of inner.slice(name.length).matchAll(ATTR_RE)) {
        el.attrs[m[1]] = decodeEntities(m[2] ?? m[3] ?? '');
      }
      top.children.push(el);
      if (!selfClosing) stack.push(el);
      pos = gt + 1;
    }
  }
  const first = root.children[0];
  if (!first) throw new Error('no XML element found');
  return first;
}

/** First child element with the given name. */
export function child(el: XmlElement | undefined, name: string): XmlElement | undefined {
  return el?.children.find((c) => c.name === name);
}

export function children(el: XmlElement | undefined, name: string): XmlElement[] {
  return el?.children.filter((c) => c.name === name) ?? [];
}

function skipPast(xml: string, from: number, marker: string): number {
  const end = xml.indexOf(marker, from);
  return end < 0 ? xml.length : end + marker.length;
}

/** Index of the `>` closing a start tag, skipping `>` inside quoted attribute values. */
function findTagEnd(xml: string, from: number): number {
  let quote = '';
  for (let i = from + 1; i < xml.length; i++) {
    const c = xml[i];
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '>') {
      return i;
    }
  }
  return xml.length;
}
