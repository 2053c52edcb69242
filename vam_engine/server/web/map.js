// A top-down map of where the moments in view were taken, for cameras with poses (a robot
// pushing frames with poses, a live camera with a pose source): one point per moment, coloured
// by camera, the path of each camera drawn through its points in time order. A point opens its
// frame in the viewer. Drawn from the timeline's moments (S.data, app.js), so it follows the
// time range chosen above. Map y points up.
"use strict";

const MAP_COLOURS = ["#e4572e", "#29a0b1", "#76b041", "#ffc914", "#a259c4", "#f08cae", "#5d7cbf", "#9a6d38"];
const MAP_SIZE = 300, MAP_PAD = 14;
const svgEl = (tag, attrs = {}) => {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

function drawMap() {
  const card = $("map-card"), svg = $("map");
  if (!card || !svg) return;
  const byCam = [];
  S.cameras.forEach((c, k) => {
    const ms = ((S.data[c.camera_id] || {}).moments || []).filter((m) => m.pose);
    if (ms.length) byCam.push({ camera: c.camera_id, colour: MAP_COLOURS[k % MAP_COLOURS.length], ms });
  });
  card.hidden = !byCam.length;
  if (!byCam.length) { svg.replaceChildren(); return; }
  const all = byCam.flatMap((c) => c.ms.map((m) => m.pose));
  const x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x));
  const y0 = Math.min(...all.map((p) => p.y)), y1 = Math.max(...all.map((p) => p.y));
  const scale = (MAP_SIZE - 2 * MAP_PAD) / Math.max(x1 - x0, y1 - y0, 1e-6);  // one scale: shapes keep their form
  const px = (p) => MAP_PAD + (p.x - x0) * scale, py = (p) => MAP_SIZE - MAP_PAD - (p.y - y0) * scale;
  const kids = [];
  for (const c of byCam) {
    const ms = [...c.ms].sort((a, b) => a.t - b.t);
    kids.push(svgEl("polyline", { class: "path", stroke: c.colour, fill: "none",
      points: ms.map((m) => `${px(m.pose).toFixed(1)},${py(m.pose).toFixed(1)}`).join(" ") }));
    for (const m of ms) {
      const where = `(${m.pose.x.toFixed(2)}, ${m.pose.y.toFixed(2)}) in map '${m.pose.frame}'`;
      const dot = svgEl("circle", { class: "pt", cx: px(m.pose).toFixed(1), cy: py(m.pose).toFixed(1), r: 4,
        fill: c.colour, "data-moment": m.moment_id, "data-camera": c.camera });
      const title = svgEl("title"); title.textContent = `${c.camera} ${fmtT(m.t)} at ${where}`;
      dot.append(title);
      dot.addEventListener("click", () => openViewer(`${c.camera} ${fmtT(m.t)}`, [m.frame], `seen at ${where}`));
      kids.push(dot);
    }
  }
  svg.replaceChildren(...kids);
  $("map-legend").replaceChildren(...byCam.map((c) => el("span", { class: "legend" },
    el("i", { style: `background:${c.colour}` }), c.camera + ` (${c.ms.length})`)),
    el("span", { class: "scale", text: `${(x1 - x0).toFixed(1)} × ${(y1 - y0).toFixed(1)} m` }));
}
