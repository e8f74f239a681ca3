// A small bar chart as inline SVG, built node by node.
const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

// drawBars draws values (oldest first) into host, scaled to the largest.
export function drawBars(host, values, label) {
  const w = 300, h = 90, pad = 14;
  const max = Math.max(1, ...values);
  const root = svg('svg', { viewBox: `0 0 ${w} ${h}`, role: 'img', 'aria-label': label, preserveAspectRatio: 'none' });
  const title = svg('title', {});
  title.textContent = label;
  root.append(title);
  root.append(svg('line', { x1: 0, y1: h - pad, x2: w, y2: h - pad, stroke: '#8a93a3', 'stroke-width': 1 }));
  const bw = w / Math.max(1, values.length);
  values.forEach((v, i) => {
    const bh = (h - 2 * pad) * (v / max);
    root.append(svg('rect', { x: i * bw + 0.5, y: h - pad - bh, width: Math.max(1, bw - 1), height: bh, fill: '#1f4e8c' }));
  });
  const top = svg('text', { x: 2, y: 11, 'font-size': 10, fill: '#4a5261' });
  top.textContent = `max ${max}`;
  const axis = svg('text', { x: 2, y: h - 2, 'font-size': 10, fill: '#4a5261' });
  axis.textContent = '-5 min';
  const now = svg('text', { x: w - 2, y: h - 2, 'font-size': 10, fill: '#4a5261', 'text-anchor': 'end' });
  now.textContent = 'now';
  root.append(top, axis, now);
  host.replaceChildren(root);
}
