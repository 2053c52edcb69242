// vam_engine's operator page: per-camera timelines (frames, events, what was said), search, ask,
// monitors and live alerts, the entities perception found per camera, and the boxes and labels of
// detections and OCR lines drawn over the frames in the viewer.
// Plain JS, no build step. Every API call carries the bearer token (kept in localStorage; a
// "#token=..." fragment is taken once and removed from the address bar: fragments never reach
// the server's logs). Frames are fetched with the token and shown as blob URLs.
"use strict";

const $ = (id) => document.getElementById(id);
const S = {
  token: localStorage.getItem("vam_token") || "",
  cited: [],              // boxes the open viewer's evidence cites (drawn highlighted)
  cameras: [],            // from /api/cameras
  view: null,             // {t0, t1} on the shared time axis
  span: "all",            // seconds or "all"
  follow: true,
  data: {},               // camera -> {moments, events, said}
  alerts: [],             // newest last
  monitors: [],
  ws: null, wsDelay: 1000, wsAuthFailed: false,
  monitorsAvailable: true,
};

// -- helpers ---------------------------------------------------------------------------------
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

function authHeaders(extra = {}) {
  return S.token ? { ...extra, Authorization: "Bearer " + S.token } : extra;
}

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: authHeaders(opts.headers || {}) });
  if (!r.ok) {
    let detail = r.statusText;
    try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
    if (r.status === 401) askToken();
    throw new ApiError(r.status, typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return r;
}
const getJSON = async (path) => (await api(path)).json();
const postJSON = async (path, body, headers = {}) =>
  (await api(path, { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json", ...headers } })).json();

function toast(msg) {
  const t = $("toast");
  t.textContent = msg; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
}

function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v == null) continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(k, x)); else u.append(k, v);
  }
  return u.toString();
}

// times: absolute (unix seconds) when above 1e9, else seconds since the stream began
function fmtT(t, span) {
  if (t == null) return "–";
  if (t > 1e9) {
    const d = new Date(t * 1000);
    const hms = d.toLocaleTimeString([], { hour12: false });
    return span != null && span > 86400 ? d.toLocaleDateString() + " " + hms : hms;
  }
  const s = Math.abs(t), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const ss = (span != null && span < 60) ? sec.toFixed(1).padStart(4, "0") : String(Math.floor(sec)).padStart(2, "0");
  return (t < 0 ? "−" : "") + (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + ss;
}

// -- frames with the token: blob URLs, a few at a time, cached ------------------------------------
const imgCache = new Map();  // url -> Promise<objectURL>
let inFlight = 0; const waiting = [];
function fetchBlobURL(url) {
  if (imgCache.has(url)) return imgCache.get(url);
  const p = new Promise((resolve, reject) => {
    const run = () => {
      inFlight++;
      fetch(url, { headers: authHeaders() })
        .then((r) => (r.ok ? r.blob() : Promise.reject(new ApiError(r.status, r.statusText))))
        .then((b) => resolve(URL.createObjectURL(b)), reject)
        .finally(() => { inFlight--; if (waiting.length) waiting.shift()(); });
    };
    if (inFlight < 6) run(); else waiting.push(run);
  });
  imgCache.set(url, p);
  if (imgCache.size > 800) {  // forget the oldest
    const [old, op] = imgCache.entries().next().value;
    imgCache.delete(old); op.then((u) => URL.revokeObjectURL(u), () => {});
  }
  p.catch(() => imgCache.delete(url));
  return p;
}
function setImg(img, url) {
  img.dataset.src = url;
  fetchBlobURL(url).then((u) => { if (img.dataset.src === url) img.src = u; }, () => { img.classList.add("missing"); });
}
function thumb(url, caption, onclick, w = 192) {
  const img = el("img", { alt: caption || "" });
  if (url) setImg(img, url + (url.includes("?") ? "&" : "?") + "w=" + w);
  return el("div", { class: "thumb", title: caption || "", onclick }, img, caption ? el("div", { class: "cap", text: caption }) : null);
}

// -- token ----------------------------------------------------------------------------------------
function askToken() {
  const d = $("token-dialog");
  if (!d.open) { $("token-input").value = S.token; d.showModal(); }
}
function takeFragmentToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    S.token = decodeURIComponent(m[1]);
    localStorage.setItem("vam_token", S.token);
    history.replaceState(null, "", location.pathname + location.search);
  }
}

// -- the timeline -------------------------------------------------------------------------------
function trackWidth() { return Math.max(100, $("rows").clientWidth - 150); }
function xOf(t) { const v = S.view; return ((t - v.t0) / (v.t1 - v.t0)) * trackWidth(); }
function tOf(x) { const v = S.view; return v.t0 + (x / trackWidth()) * (v.t1 - v.t0); }

function extent() {
  let lo = Infinity, hi = -Infinity;
  for (const c of S.cameras) {
    if (c.t_first != null) lo = Math.min(lo, c.t_first);
    if (c.t_last != null) hi = Math.max(hi, c.t_last);
  }
  return lo === Infinity ? null : { lo, hi };
}

function followView() {
  const e = extent();
  if (!e) return;
  const pad = Math.max(1, (e.hi - e.lo) * 0.02);
  if (S.span === "all") S.view = { t0: e.lo - pad, t1: e.hi + pad };
  else S.view = { t0: e.hi - S.span + pad, t1: e.hi + pad };
}

function niceStep(span, px) {
  const want = span / Math.max(1, px / 110);
  const steps = [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
  return steps.find((s) => s >= want) || steps[steps.length - 1];
}

function drawAxis() {
  const axis = $("axis"); axis.replaceChildren();
  if (!S.view) return;
  const span = S.view.t1 - S.view.t0, step = niceStep(span, trackWidth());
  for (let t = Math.ceil(S.view.t0 / step) * step; t <= S.view.t1; t += step) {
    axis.append(el("div", { class: "tick", style: `left:${xOf(t)}px`, text: fmtT(t, span) }));
  }
}

function statusBadge(st) {
  if (!st) return el("span", { class: "state", text: "stored" });
  const fps = st.input_fps != null ? ` ${Number(st.input_fps).toFixed(1)} fps` : "";
  const lag = st.lag_s != null && st.lag_s > 1 ? `, lag ${Number(st.lag_s).toFixed(0)} s` : "";
  const a = st.audio;  // the camera's audio path: no_audio, running, behind (speech dropped), error
  const heard = a ? ` · audio ${a.state.replace("_", " ")}` + (a.seconds_dropped ? ` (${Math.round(a.seconds_dropped)} s dropped)` : "") : "";
  const why = [st.error, a && a.error ? "audio: " + a.error : null].filter(Boolean).join("; ");
  return el("span", { class: "state " + st.state, title: why, text: st.state + fps + lag + heard });
}

function drawRows() {
  const rows = $("rows");
  if (!S.cameras.length) {
    rows.replaceChildren(el("div", { class: "empty", text: "no cameras yet: index a video, push frames, or add a camera (POST /api/cameras)" }));
    return;
  }
  const span = S.view ? S.view.t1 - S.view.t0 : 1;
  const out = [];
  for (const c of S.cameras) {
    const label = el("div", { class: "label" },
      el("div", { class: "name", text: c.camera_id, title: c.camera_id }),
      el("div", { class: "meta", text: `${c.moments} moments · ${c.events} events` }),
      statusBadge(c.status));
    const track = el("div", { class: "track", "data-camera": c.camera_id });
    const d = S.data[c.camera_id] || { moments: [], events: [], said: [] };
    if (S.view) {
      for (const e of d.events) {
        const x0 = xOf(e.t_start), x1 = xOf(e.t_end);
        if (x1 < 0 || x0 > trackWidth()) continue;
        track.append(el("div", { class: "ev" + (e.doc ? " doc" : ""), style: `left:${x0}px;width:${Math.max(2, x1 - x0)}px`,
          title: (e.doc || "event") + ` (${fmtT(e.t_start, span)}–${fmtT(e.t_end, span)})`,
          onclick: () => openViewer(`${c.camera_id} · event ${fmtT(e.t_start, span)}–${fmtT(e.t_end, span)}`, e.frames, e.doc, 0, [],
            e.clip) }));
      }
      for (const sp of d.said || []) {  // transcript segments: what was said, on a lane under the events
        const x0 = xOf(sp.t_start), x1 = xOf(sp.t_end);
        if (x1 < 0 || x0 > trackWidth()) continue;
        const w = Math.max(3, x1 - x0);
        track.append(el("div", { class: "sp", style: `left:${x0}px;width:${w}px`,
          title: `“${sp.text}” (${fmtT(sp.t_start, span)}–${fmtT(sp.t_end, span)})`,
          onclick: (ev) => { ev.stopPropagation(); openSpeech(c.camera_id, sp); } }, w > 40 ? sp.text : null));
      }
      let lastX = -1e9;
      const frames = d.moments.map((m) => m.frame);
      d.moments.forEach((m, i) => {
        const x = xOf(m.t);
        if (x < -100 || x > trackWidth()) return;
        if (d.moments.length < 1500) track.append(el("div", { class: "tickmark", style: `left:${x}px` }));
        if (x - lastX < 100) return;
        lastX = x;
        const img = el("img", { alt: "" }); setImg(img, m.frame + "?w=192");
        track.append(el("div", { class: "mt", style: `left:${x - 48}px`, title: `${c.camera_id} ${fmtT(m.t, span)}`,
          onclick: () => openViewer(`${c.camera_id} · ${fmtT(m.t, span)}`, frames, null, i) }, img));
      });
      for (const a of S.alerts) {
        if (a.camera_id !== c.camera_id) continue;
        const x = xOf(a.t);
        if (x < 0 || x > trackWidth()) continue;
        track.append(el("div", { class: "al", style: `left:${x}px`, title: `alert: ${a.observed} (${fmtT(a.t, span)})`,
          onclick: (ev) => { ev.stopPropagation(); openAlert(a); } }));
      }
      if (S.cursor != null && S.cursor.camera === c.camera_id) {
        track.append(el("div", { class: "cursor", style: `left:${xOf(S.cursor.t)}px` }));
      }
    }
    out.push(el("div", { class: "cam" }, label, track));
  }
  rows.replaceChildren(...out);
}

function render() { drawAxis(); drawRows(); if (window.drawMap) drawMap(); }  // map.js: where, for cameras with poses

let loadSeq = 0;
async function loadView() {
  if (!S.view) return;
  const seq = ++loadSeq, v = S.view;
  const span = v.t1 - v.t0, t0 = v.t0 - span * 0.05, t1 = v.t1 + span * 0.05;
  const got = {};
  await Promise.all(S.cameras.map(async (c) => {
    try {
      const [m, e, sp] = await Promise.all([
        getJSON("/api/moments?" + qs({ camera: c.camera_id, t0, t1, limit: 1000 })),
        getJSON("/api/events?" + qs({ camera: c.camera_id, t0, t1, limit: 1000 })),
        getJSON("/api/transcripts?" + qs({ camera: c.camera_id, t0, t1, limit: 1000 })).catch(() => ({ items: [] }))]);
      got[c.camera_id] = { moments: m.items, events: e.items, said: sp.items };
    } catch (err) { got[c.camera_id] = S.data[c.camera_id] || { moments: [], events: [], said: [] }; }
  }));
  if (seq !== loadSeq) return;  // a newer view was asked for meanwhile
  S.data = got;
  render();
}

async function refreshCameras() {
  try {
    const r = await getJSON("/api/cameras");
    const before = S.cameras.map((c) => c.camera_id).join("\n");
    S.cameras = r.cameras;
    const changed = before !== S.cameras.map((c) => c.camera_id).join("\n");
    if (changed) renderAskScope();
    for (const id of ["monitor-camera", "entity-camera"]) {
      const sel = $(id), cur = sel.value;
      sel.replaceChildren(el("option", { value: "", text: "all cameras" }),
        ...S.cameras.map((c) => el("option", { value: c.camera_id, text: c.camera_id })));
      sel.value = cur;
    }
    if (S.follow || !S.view) followView();
    if (changed || S.follow) await loadView(); else render();
  } catch (err) {
    if (err.status !== 401) toast("cameras: " + err.message);
  }
}

function setSpan(span) {
  S.span = span === "all" ? "all" : Number(span);
  document.querySelectorAll(".range button").forEach((b) => b.classList.toggle("on", b.dataset.span === String(span)));
  S.follow = true; $("follow").checked = true;
  followView(); loadView();
}

function jumpTo(camera, t0, t1) {
  S.follow = false; $("follow").checked = false;
  const span = S.view ? S.view.t1 - S.view.t0 : 60;
  const mid = (t0 + t1) / 2, half = Math.max(span / 2, (t1 - t0) * 0.6, 5);
  S.view = { t0: mid - half, t1: mid + half };
  S.cursor = { camera, t: mid };
  loadView();
}

function bindTimeline() {
  const rows = $("rows");
  let drag = null;
  rows.addEventListener("mousedown", (e) => {
    if (e.target.closest(".mt,.ev,.al") || !S.view) return;
    drag = { x: e.clientX, view: { ...S.view } }; rows.classList.add("dragging");
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dt = ((e.clientX - drag.x) / trackWidth()) * (drag.view.t1 - drag.view.t0);
    S.view = { t0: drag.view.t0 - dt, t1: drag.view.t1 - dt };
    S.follow = false; $("follow").checked = false; render();
  });
  window.addEventListener("mouseup", () => { if (drag) { drag = null; rows.classList.remove("dragging"); loadView(); } });
  rows.addEventListener("wheel", (e) => {
    if (!S.view || !e.ctrlKey && Math.abs(e.deltaY) < Math.abs(e.deltaX)) return;
    e.preventDefault();
    const rect = rows.getBoundingClientRect(), t = tOf(e.clientX - rect.left - 150);
    const k = e.deltaY > 0 ? 1.25 : 0.8;
    S.view = { t0: t - (t - S.view.t0) * k, t1: t + (S.view.t1 - t) * k };
    S.follow = false; $("follow").checked = false; render();
    clearTimeout(bindTimeline.t); bindTimeline.t = setTimeout(loadView, 200);
  }, { passive: false });
  document.querySelectorAll(".range button").forEach((b) => b.addEventListener("click", () => setSpan(b.dataset.span)));
  $("follow").addEventListener("change", (e) => { S.follow = e.target.checked; if (S.follow) { followView(); loadView(); } });
  window.addEventListener("resize", render);
}

// -- the viewer ------------------------------------------------------------------------------------
// Boxes: each frame shown is a moment; its detections and OCR lines (/api/moments/{id}/detections)
// are drawn over it, normalised boxes placed on the image as object-fit: contain shows it. The
// boxes an answer or a search hit cites (S.cited) are drawn highlighted.
function momentOf(url) { const m = /\/api\/frames\/(\d+)/.exec(url || ""); return m ? Number(m[1]) : null; }

function placeBoxes(items) {
  const img = $("viewer-img"), layer = $("viewer-boxes");
  layer.replaceChildren();
  if (!img.naturalWidth || !items.length) return;
  const k = Math.min(img.clientWidth / img.naturalWidth, img.clientHeight / img.naturalHeight);
  const w = img.naturalWidth * k, h = img.naturalHeight * k;
  const ox = img.offsetLeft + (img.clientWidth - w) / 2, oy = img.offsetTop + (img.clientHeight - h) / 2;
  for (const b of items) {
    if (!b.norm) continue;
    const [x0, y0, x1, y1] = b.norm;
    const cited = S.cited.some((c) => c.moment_id === b.moment_id && c.label === b.label &&
      Math.abs(c.box[0] - b.box[0]) < 1 && Math.abs(c.box[1] - b.box[1]) < 1);
    const score = b.kind === "text" || b.score == null ? "" : ` ${Math.round(b.score * 100)}%`;
    layer.append(el("div", { class: `box ${b.kind}${cited ? " cited" : ""}`, "data-label": b.label,
      style: `left:${ox + x0 * w}px;top:${oy + y0 * h}px;width:${(x1 - x0) * w}px;height:${(y1 - y0) * h}px` },
      el("span", { text: b.label + score })));
  }
}

async function drawBoxes(url) {
  const id = momentOf(url), layer = $("viewer-boxes");
  layer.replaceChildren(); layer.dataset.moment = id == null ? "" : String(id);
  if (id == null) return;
  let items = [];
  try {
    const r = await getJSON(`/api/moments/${id}/detections`);
    items = [...r.detections, ...r.ocr];
  } catch (err) { items = S.cited.filter((c) => c.moment_id === id); }  // 501: no perception reads here
  if (layer.dataset.moment !== String(id)) return;  // another frame is shown by now
  const img = $("viewer-img");
  if (img.complete && img.naturalWidth) placeBoxes(items); else img.onload = () => placeBoxes(items);
  layer.dataset.count = String(items.length);
}

// the clip of what the viewer shows (a `clip` URL of /api/clips): fetched with the token, played in place
let clipURL = null;
function setClip(url) {
  const video = $("viewer-video"), button = $("viewer-clip");
  video.pause(); video.hidden = true; video.removeAttribute("src");
  if (clipURL) { URL.revokeObjectURL(clipURL); clipURL = null; }
  button.hidden = !url;
  button.onclick = !url ? null : async () => {
    button.disabled = true; button.textContent = "loading clip…";
    try {
      const r = await fetch(url, { headers: authHeaders() });
      if (!r.ok) throw new ApiError(r.status, (await r.json().catch(() => ({}))).detail || r.statusText);
      clipURL = URL.createObjectURL(await r.blob());
      video.src = clipURL; video.hidden = false; button.hidden = true; video.play().catch(() => {});
    } catch (err) { toast("clip: " + err.message); }
    finally { button.disabled = false; button.textContent = "▶ clip"; }
  };
}

function openViewer(title, frames, text, index = 0, cited = [], clip = null) {
  S.cited = cited;
  setClip(clip);
  $("viewer").hidden = false;
  $("viewer-title").textContent = title;
  $("viewer-text").textContent = text || "";
  const strip = $("viewer-strip"); strip.replaceChildren();
  const show = (i) => {
    if (!frames.length) { $("viewer-img").removeAttribute("src"); $("viewer-boxes").replaceChildren(); return; }
    setImg($("viewer-img"), frames[i]);
    drawBoxes(frames[i]);
    strip.querySelectorAll(".thumb").forEach((t, k) => t.classList.toggle("sel", k === i));
  };
  if (frames.length > 1) frames.forEach((f, i) => strip.append(thumb(f, null, () => show(i), 128)));
  show(Math.min(index, Math.max(0, frames.length - 1)));
}

async function openEvidence(ev, label) {
  let frames = ev.frames || [];
  if (!frames.length && ev.camera_id && ev.camera_id !== "*") {  // cited from the present: the moments of its interval
    try {
      const r = await getJSON("/api/moments?" + qs({ camera: ev.camera_id, t0: ev.t_start - 0.5, t1: ev.t_end + 0.5, limit: 16 }));
      frames = r.items.map((m) => m.frame);
    } catch (err) { toast(err.message); }
  }
  const span = ev.t_end - ev.t_start;
  openViewer(`${label || ""} ${ev.camera_id} · ${fmtT(ev.t_start, span)}–${fmtT(ev.t_end, span)} (${ev.source})`, frames, ev.text,
    0, ev.boxes || [], ev.clip);
  if (ev.camera_id && ev.camera_id !== "*") jumpTo(ev.camera_id, ev.t_start, ev.t_end);
}

function openSpeech(camera, sp) {
  openEvidence({ camera_id: camera, t_start: sp.t_start, t_end: sp.t_end, source: "speech", frames: [],
    text: `“${sp.text}”` }, "said:");
}

// -- search --------------------------------------------------------------------------------------
async function doSearch(e) {
  e.preventDefault();
  const text = $("search-text").value.trim(), file = $("search-image").files[0];
  if (!text && !file) return;
  const out = $("search-results"); out.replaceChildren(el("div", { class: "notes", text: "searching…" }));
  try {
    let res;
    if (file) {
      const fd = new FormData(); fd.append("image", file); if (text) fd.append("text", text); fd.append("top_k", "12");
      res = await (await api("/api/search", { method: "POST", body: fd })).json();
    } else {
      res = await postJSON("/api/search", { text, top_k: 12 });
    }
    $("search-notes").textContent = res.notes.join(" · ");
    out.replaceChildren(...res.evidence.map((ev) => {
      const cap = `${ev.camera_id} ${fmtT(ev.t_start, ev.t_end - ev.t_start)}`;
      if (ev.source === "speech") {  // what was said: its words on the card, its frames behind them
        const said = { ...ev, text: `“${ev.text}”` };
        const t = thumb(ev.frames[0], cap, () => openEvidence(said, "said:"));
        t.classList.add("said"); t.title = said.text;
        t.prepend(el("div", { class: "quote", text: said.text }));
        return t;
      }
      const t = thumb(ev.frames[0], cap, () => openEvidence(ev, "search:"));
      t.title = ev.text || cap;
      return t;
    }));
    if (!res.evidence.length) out.replaceChildren(el("div", { class: "notes", text: "no results" }));
  } catch (err) { out.replaceChildren(el("div", { class: "notes", text: "search failed: " + err.message })); }
}

// -- entities (perception) --------------------------------------------------------------------------
function fmtSeen(e) {
  return Object.entries(e.seen).map(([cam, s]) => `${cam} ${fmtT(s.first_t, s.last_t - s.first_t)}–${fmtT(s.last_t, s.last_t - s.first_t)}`).join(", ");
}

async function listEntities(e) {
  if (e) e.preventDefault();
  const camera = $("entity-camera").value, label = $("entity-label").value.trim(), out = $("entity-list");
  try {
    const r = await getJSON("/api/entities?" + qs({ camera: camera || undefined, label: label || undefined, limit: 100 }));
    const byCam = {};
    for (const ent of r.items) for (const cam of Object.keys(ent.seen)) (byCam[cam] = byCam[cam] || []).push(ent);
    const rows = [];
    for (const cam of Object.keys(byCam).sort()) {
      rows.push(el("li", { class: "cam-head", text: `${cam} · ${byCam[cam].length} entities` }));
      for (const ent of byCam[cam]) {
        const desc = [ent.label, ...ent.colours].join(" ") + (ent.texts.length ? ` “${ent.texts.slice(0, 2).join(", ")}”` : "");
        rows.push(el("li", { class: "entity", "data-entity": String(ent.entity_id), onclick: () => openEntity(ent.entity_id) },
          ent.crop ? thumb(ent.crop, null, null, 96) : el("div", { class: "thumb" }),
          el("div", { class: "d" }, el("b", { text: `#${ent.entity_id} ${desc}` }), el("div", { text: fmtSeen(ent) }))));
      }
    }
    out.replaceChildren(...(rows.length ? rows : [el("li", { class: "empty", text: "no entities" })]));
  } catch (err) {
    out.replaceChildren(el("li", { class: "empty", text: err.status === 501 ? "no entities on this server" : "entities: " + err.message }));
  }
}

async function openEntity(id) {
  try {
    const r = await getJSON(`/api/entities/${id}`);
    const s = r.sightings.slice(-16);
    const e = r.entity;
    openViewer(`entity #${id} · ${e.label} ${e.colours.join(" ")}`, s.map((x) => x.frame),
      `${fmtSeen(e)}${e.texts.length ? " · read: " + e.texts.join(", ") : ""}`, Math.max(0, s.length - 1), s);
    const last = s[s.length - 1];
    if (last) jumpTo(last.camera_id, last.t - 2, last.t + 2);
  } catch (err) { toast("entity: " + err.message); }
}

// -- ask (SSE over a POST: fetch's stream reader) --------------------------------------------------
// The scope: every camera in view ("all cameras"), or the ones ticked; the answer then says what
// it looked at (the budget's account in its trace: the cameras shown, the rest summarised).
function renderAskScope() {
  const box = $("ask-cameras"), ticked = new Set(askScope() || []);
  box.replaceChildren(...S.cameras.map((c) => {
    const box = el("input", { type: "checkbox", value: c.camera_id, onchange: () => { $("ask-all").checked = !askScope(); } });
    box.checked = ticked.has(c.camera_id);
    return el("label", { class: "chip" }, box, c.camera_id);
  }));
  $("ask-all").checked = !askScope();
}

function askScope() {  // the ticked cameras, or null: all in view
  const ids = [...$("ask-cameras").querySelectorAll("input:checked")].map((i) => i.value);
  return ids.length ? ids : null;
}

function lookedAt(a, scope) {
  const b = (a.trace || []).find((t) => t.stage === "budget");
  const asked = scope ? `asked of ${scope.join(", ")}` : "asked of all cameras";
  if (!b || !b.detail) return asked;
  const d = b.detail, shown = (d.shown || []).map(([cam, why, n]) => {
    const reasons = why.filter((w) => w !== "active");  // named, matches, alert: why it was chosen
    return `${cam} (${[`${n} image${n === 1 ? "" : "s"}`, ...reasons].join(", ")})`;
  });
  let text = `${asked} · looked at ${shown.join(", ") || "no camera"}`;
  if (d.summarised) text += ` · ${d.summarised} more in one line each`;
  if (d.unlisted) text += ` · ${d.unlisted} not listed`;
  const r = d.requests || {}, parts = Object.entries(r).map(([k, v]) => `${k} ${v.images} img / ${v.tokens} tok`);
  if (parts.length) text += ` · ${parts.join(", ")} (budget ${d.max_images} img / ${d.max_tokens} tok)`;
  return text;
}

async function doAsk(e) {
  e.preventDefault();
  const question = $("ask-text").value.trim();
  if (!question) return;
  const stages = $("ask-stages"), ans = $("ask-answer"), scope = askScope();
  stages.textContent = "thinking…"; ans.replaceChildren(); $("ask-looked").textContent = "";
  try {
    const r = await api("/api/ask", { method: "POST", body: JSON.stringify(scope ? { question, cameras: scope } : { question }),
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" } });
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "", steps = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        let event = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (!data) continue;
        const d = JSON.parse(data);
        if (event === "stage" && d.kind === "model_reply") { steps.push(d.tags.join("+")); stages.textContent = steps.join(" → ") + " …"; }
        else if (event === "answer") { stages.textContent = steps.join(" → ") + ` · ${(d.timings.response_s || 0).toFixed(2)} s`; showAnswer(d); $("ask-looked").textContent = lookedAt(d, scope); }
        else if (event === "error") { stages.textContent = ""; ans.replaceChildren(el("div", { class: "text nf", text: d.detail })); }
      }
    }
  } catch (err) { stages.textContent = ""; ans.replaceChildren(el("div", { class: "text nf", text: err.message })); }
}

function showAnswer(a) {
  const cites = a.evidence.map((ev, i) => el("span", { class: "cite", title: ev.text || "",
    text: `[${i + 1}] ${ev.camera_id} ${fmtT(ev.t_start, ev.t_end - ev.t_start)}–${fmtT(ev.t_end, ev.t_end - ev.t_start)}`,
    onclick: () => openEvidence(ev, `[${i + 1}]`) }));
  const p = a.position, tools = a.tool_citations || [];
  const where = p ? el("div", { class: "notes", text: `seen at (${p.x.toFixed(2)}, ${p.y.toFixed(2)}) in map '${p.frame}'` }) : null;
  const outside = tools.map((c, i) => el("div", { class: "notes tool", text: `[tool ${i + 1}] ${c.title} <${c.url}>` }));
  $("ask-answer").replaceChildren(el("div", { class: "text" + (a.found ? "" : " nf"), text: a.text }), where,
    el("div", {}, ...cites), ...outside);
}

// -- monitors and alerts -------------------------------------------------------------------------
async function refreshMonitors() {
  try {
    S.monitors = (await getJSON("/api/monitors")).monitors;
  } catch (err) {
    if (err.status === 501) { S.monitorsAvailable = false; $("monitor-list").replaceChildren(el("li", { class: "empty", text: "this engine has no monitors" })); }
    return;
  }
  $("monitor-list").replaceChildren(...S.monitors.map((m) => el("li", {},
    el("div", { class: "c" }, el("div", { text: m.condition }),
      el("div", { class: "m", text: `${m.cameras ? m.cameras.join(", ") : "all cameras"} · ${m.mode} · ≥ ${m.min_confidence}` })),
    el("button", { title: "stop watching", text: "remove", onclick: () => removeMonitor(m.monitor_id) }))));
  if (!S.monitors.length) $("monitor-list").replaceChildren(el("li", { class: "empty", text: "no active monitors" }));
}

async function addMonitor(e) {
  e.preventDefault();
  const condition = $("monitor-condition").value.trim();
  if (!condition) return;
  const cam = $("monitor-camera").value;
  try {
    await postJSON("/api/monitors", { condition, cameras: cam ? [cam] : null, mode: $("monitor-mode").value });
    $("monitor-condition").value = "";
    refreshMonitors();
  } catch (err) { toast("monitor: " + err.message); }
}

async function removeMonitor(id) {
  try { await api("/api/monitors/" + encodeURIComponent(id), { method: "DELETE" }); } catch (err) { toast(err.message); }
  refreshMonitors();
}

function alertItem(a, fresh) {
  const frame = a.frames[a.frames.length - 1] || a.moment_frames[0];
  const mon = S.monitors.find((m) => m.monitor_id === a.monitor_id);
  return el("li", { class: fresh ? "new" : "", onclick: () => openAlert(a) },
    thumb(frame, null, null, 144),
    el("div", { class: "d" }, el("b", { text: a.camera_id + " " + fmtT(a.t, 30) }),
      el("div", { text: mon ? mon.condition : a.monitor_id }), el("div", { text: `${a.observed} (${Math.round(a.confidence * 100)}%)` })));
}

function addAlert(a, fresh) {
  if (S.alerts.some((x) => x.alert_id === a.alert_id)) return;
  S.alerts.push(a);
  const list = $("alert-list");
  list.querySelectorAll(".empty").forEach((x) => x.remove());
  list.prepend(alertItem(a, fresh));
  while (list.children.length > 100) list.lastChild.remove();
  if (fresh) { drawRows(); refreshMonitors(); }
}

function openAlert(a) {
  openViewer(`alert · ${a.camera_id} · ${fmtT(a.t, 30)} · ${Math.round(a.confidence * 100)}%`, a.frames.length ? a.frames : a.moment_frames, a.observed, a.frames.length - 1, [], a.clip);
  jumpTo(a.camera_id, a.t - 2, a.t + 2);
}

async function loadAlerts() {
  try {
    const r = await getJSON("/api/alerts");
    r.alerts.slice(-50).forEach((a) => addAlert(a, false));
  } catch (err) { /* 501: no monitors */ }
}

// -- the live socket ------------------------------------------------------------------------------
function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/ws");
  S.ws = ws;
  ws.onopen = () => { if (S.token) ws.send(JSON.stringify({ type: "auth", token: S.token })); };
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.type === "hello") { $("conn").className = "conn on"; $("conn").textContent = "live"; S.wsDelay = 1000; }
    else if (m.type === "alert") addAlert(m.alert, true);
    else if (m.type === "camera_status") {
      const c = S.cameras.find((x) => x.camera_id === m.camera.camera_id);
      if (c) { c.status = m.camera.state === "removed" ? null : m.camera; drawRows(); } else refreshCameras();
    } else if (m.type === "error") { S.wsAuthFailed = m.status === 401 || m.status === 403; if (S.wsAuthFailed) askToken(); }
  };
  ws.onclose = () => {
    $("conn").className = "conn off"; $("conn").textContent = "offline";
    if (S.wsAuthFailed) return;  // reconnects once a token is given
    setTimeout(connect, S.wsDelay); S.wsDelay = Math.min(30000, S.wsDelay * 2);
  };
}

// -- start ------------------------------------------------------------------------------------------
function start() {
  takeFragmentToken();
  $("token-btn").addEventListener("click", askToken);
  $("token-form").addEventListener("submit", (e) => {
    const how = e.submitter ? e.submitter.value : "ok";
    S.token = how === "clear" ? "" : $("token-input").value.trim();
    if (S.token) localStorage.setItem("vam_token", S.token); else localStorage.removeItem("vam_token");
    S.wsAuthFailed = false;
    if (S.ws) S.ws.close();
    refreshAll();
  });
  $("viewer-close").addEventListener("click", () => { $("viewer").hidden = true; setClip(null); S.cursor = null; drawRows(); });
  $("search-form").addEventListener("submit", doSearch);
  $("search-image").addEventListener("change", (e) => e.target.parentElement.classList.toggle("has", !!e.target.files.length));
  $("ask-form").addEventListener("submit", doAsk);
  $("ask-all").addEventListener("change", () => {  // "all cameras" clears the choice
    for (const i of $("ask-cameras").querySelectorAll("input")) i.checked = false;
    $("ask-all").checked = true;
  });
  $("monitor-form").addEventListener("submit", addMonitor);
  $("entity-form").addEventListener("submit", listEntities);
  bindTimeline();
  refreshAll();
  connect();
  setInterval(refreshCameras, 3000);
}

async function refreshAll() {
  await refreshMonitors();
  await refreshCameras();
  await loadAlerts();
  await listEntities();
}

start();
