// Building DOM from daemon data without ever parsing it as HTML: every
// string becomes a text node.

// el makes an element; attrs sets attributes (class, data-*, aria-*, …) and
// children are nodes or strings (strings become text).
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// fill replaces an element's children.
export function fill(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

// dl builds a definition list from [term, value] pairs, skipping empty values.
export function dl(pairs, attrs = {}) {
  const d = el('dl', attrs);
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '') continue;
    d.append(el('dt', {}, k), el('dd', {}, v));
  }
  return d;
}

// short cuts a long id to its first characters, keeping the whole in a title.
export function short(id, n = 8) {
  const s = String(id ?? '');
  return s.length > n + 1 ? s.slice(0, n) + '…' : s;
}

export function clock(ts) {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString();
}
