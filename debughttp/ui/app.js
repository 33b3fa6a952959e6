// The strata page: it polls the handler's JSON endpoints and shows what
// they say. Everything read from the database is written into the page as
// text (text nodes, attribute values), never as markup.
"use strict";

const POLL_MS = 1500; // the wait between the end of one poll and the next
const TOKEN_KEY = "strata-token";
const PREVIEW_CHARS = 600; // a longer text shows this much until opened
const PREVIEW_LINES = 8;
const api = new URL("../", location.href); // the endpoints: the page is at {prefix}/ui/

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  session: "",      // the selected session's id
  indexText: "",    // the last index, as received: unchanged means nothing to redraw
  sessionText: "",  // the last session document, as received
  sessions: [],     // the sessions endpoint's list
  doc: null,        // the selected session's document
  nodesKey: "",     // the frame version the nodes were read at
  nodes: [],
  contextSHA: "",   // the sha256 of the context text shown
  // The timeline's window: from/to as asked (null: the head's end, followed
  // live), the filters, the answer, and how many windows were asked for
  // (only the last one asked is drawn).
  tl: { from: null, to: null, q: "", marked: false, item: null, focus: 0, doc: null, head: -1, asked: 0 },
  drawn: new Map(), // each part of the session view: the JSON it was drawn from
  open: new Set(),  // the ids of the <details> a person opened (or closed, with "!")
  timer: 0,
  busy: false,      // a poll is running
  again: false,     // poll again as soon as it ends
};

// el makes an element: attrs are set as properties (className, title, ...),
// children are elements or strings (made text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// put replaces e's children with children, flattened as el flattens them.
function put(e, ...children) {
  e.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// keep draws list's children from items, [data, make] pairs in order: a
// child drawn from the same data stays the same element, where it was or
// moved, and only the others are made anew (make()). What a person opened
// in a kept child stays open, and a click on it is not lost (pressed on the
// old element, released on its replacement).
function keep(list, items) {
  const old = new Map();
  for (const c of list.children) old.set(c.strataData, c);
  let at = list.firstElementChild;
  for (const [data, make] of items) {
    const key = JSON.stringify(data);
    let c = old.get(key);
    if (c) old.delete(key);
    else { c = make(); c.strataData = key; }
    if (c === at) at = at.nextElementSibling;
    else list.insertBefore(c, at);
  }
  for (const c of old.values()) c.remove();
}

const num = (n) => Number(n).toLocaleString("en-US");
const plural = (n, one, many) => num(n) + " " + (n === 1 ? one : (many || one + "s"));
const seqs = (from, to) => from <= to ? "seq " + num(from) + ".." + num(to) : "none";

// CONTROL matches the characters a stored text may hold that would not show
// as themselves: C0 and C1 controls (but tab and line feed), DEL, and the
// invisible format characters (zero widths, bidirectional overrides).
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

// shown returns s as nodes: text, with each control character as a marked
// escape (\x07, \u202e).
function shown(s) {
  s = String(s);
  const out = [];
  let last = 0;
  for (const m of s.matchAll(CONTROL)) {
    if (m.index > last) out.push(s.slice(last, m.index));
    const c = m[0].charCodeAt(0);
    const esc = c === 13 ? "\\r" : c < 256 ? "\\x" + c.toString(16).padStart(2, "0") : "\\u" + c.toString(16).padStart(4, "0");
    out.push(el("span", { className: "ctl", title: "control character U+" + c.toString(16).toUpperCase().padStart(4, "0") }, esc));
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

// details makes a <details> whose open state is kept across redraws under
// id; open says its state until a person toggles it.
function details(id, open, summary, body) {
  const d = el("details", { id });
  d.open = state.open.has(id) || (open && !state.open.has("!" + id));
  d.append(el("summary", {}, summary));
  let filled = false;
  const fill = () => {
    if (d.open && !filled) { filled = true; d.append(...[body()].flat()); }
  };
  d.addEventListener("toggle", () => {
    state.open.delete(id); state.open.delete("!" + id);
    if (d.open !== open) state.open.add(d.open ? id : "!" + id);
    fill();
  });
  fill();
  return d;
}

// readHash takes the session (and a token, once) from the fragment, which
// never leaves the browser: #session=ID, #token=T.
function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has("token")) {
    state.token = h.get("token");
    sessionStorage.setItem(TOKEN_KEY, state.token);
    h.delete("token");
    history.replaceState(null, "", h.toString() ? "#" + h.toString() : location.pathname);
  }
  state.session = h.get("session") || "";
}

function setHash() {
  const h = new URLSearchParams();
  if (state.session) h.set("session", state.session);
  history.replaceState(null, "", "#" + h.toString());
}

class HTTPError extends Error {
  constructor(status, message, damaged) { super(message); this.status = status; this.damaged = damaged; }
}

// get fetches an endpoint below the prefix and returns its body as text.
async function get(path) {
  const headers = {};
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const resp = await fetch(new URL(path, api), { headers, cache: "no-store" });
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text, damaged = false;
    try { const e = JSON.parse(text); msg = e.error || text; damaged = e.damaged === true; } catch (_) { /* not JSON: as it is */ }
    throw new HTTPError(resp.status, resp.status + " " + resp.statusText + ": " + msg, damaged);
  }
  return text;
}

const q = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "" && v !== false)).toString();

function setStatus(text, error) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

function askToken(why) {
  const f = document.getElementById("token-form");
  f.hidden = false;
  document.getElementById("token-why").textContent = why;
}

// poll reads the index, and when it changed the session list; then the
// selected session, its nodes when its frame changed and its timeline when
// its head moved (and the timeline follows it). It redraws what changed and
// schedules the next poll. One poll runs at a time: asked for while one
// runs, it runs again right after.
async function poll() {
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  clearTimeout(state.timer);
  try {
    const indexText = await get("./");
    if (indexText !== state.indexText) {
      const idx = JSON.parse(indexText);
      state.sessions = JSON.parse(await get("sessions")).sessions;
      state.indexText = indexText;
      document.getElementById("where").textContent = api.host + api.pathname + " · format " + idx.format_version;
      if (!state.session && state.sessions.length === 1) {
        state.session = state.sessions[0].id;
        setHash();
      }
      drawSessions();
    }
    const id = state.session;
    if (id) {
      const text = await get("session?" + q({ session: id })).catch((e) => {
        // The selected session is not there, or is damaged: its view says so.
        if (e instanceof HTTPError && (e.status === 404 || e.damaged) && id === state.session) {
          state.sessionText = "";
          state.doc = null;
          drawError("Session " + JSON.stringify(id) + ": " + e.message);
        }
        throw e;
      });
      if (id === state.session && text !== state.sessionText) {
        const d = JSON.parse(text);
        const fresh = !state.doc || state.doc.id !== id;
        state.sessionText = text;
        state.doc = d;
        if (fresh) drawSkeleton(d);
        drawSession(d);
      }
      const d = state.doc;
      if (d && d.id === id) {
        const key = d.info.frame_version + "/" + d.info.compacted_to + "/" + d.info.roots;
        if (key !== state.nodesKey) {
          const nd = JSON.parse(await get("nodes?" + q({ session: id })));
          if (id === state.session) { state.nodes = nd.nodes; state.nodesKey = key; drawNodes(); }
        }
        if (state.tl.head !== d.info.head_seq && (state.tl.doc === null || following())) await loadTimeline();
        else if (state.tl.head !== d.info.head_seq) drawTimelineNav();
        if (state.contextSHA !== d.resume.sha256) await loadContext(d.resume.sha256);
      }
    }
    document.getElementById("token-form").hidden = true;
    setStatus("live · updated " + new Date().toLocaleTimeString("en-GB"), false);
  } catch (e) {
    if (e instanceof HTTPError && e.status === 401) {
      askToken(state.token ? "the token was refused" : "");
    }
    setStatus("not updated: " + e.message, true);
  } finally {
    state.busy = false;
  }
  if (state.again) {
    state.again = false;
    poll();
    return;
  }
  state.timer = setTimeout(poll, POLL_MS);
}

// ---- The session list ----

const RECENT = { hour: 3600e3, day: 86400e3, week: 7 * 86400e3 };

// drawSessions draws the sessions that match the search and the filters,
// the most recently active first.
function drawSessions() {
  const search = document.getElementById("filter").value.trim().toLowerCase();
  const refused = document.getElementById("f-refused").checked;
  const open = document.getElementById("f-open").checked;
  const recent = RECENT[document.getElementById("f-recent").value] || 0;
  const now = Date.now();
  const shownList = state.sessions.filter((s) =>
    s.id.toLowerCase().includes(search) &&
    (!refused || s.refused_to > s.compacted_to) &&
    (!open || s.open > 0) &&
    (!recent || (s.last_time && now - Date.parse(s.last_time) <= recent)));
  shownList.sort((a, b) => (b.last_time || "").localeCompare(a.last_time || "") || a.id.localeCompare(b.id));
  const filtered = search || refused || open || recent;
  document.getElementById("count").textContent =
    plural(state.sessions.length, "session") + (filtered ? ", " + num(shownList.length) + " match" : "");
  const items = shownList.map((s) => [[s, s.id === state.session], () => sessionRow(s)]);
  keep(document.getElementById("sessions"), items);
}

// sessionRow is one session's row of the list; a damaged session's says so
// (the error in its title) and nothing else.
function sessionRow(s) {
  const tail = s.head_seq - s.compacted_to;
  const b = el("button", { type: "button", dataset: { session: s.id } }, el("span", { className: "id" }, shown(s.id)),
    s.damage ? [" ", el("span", { className: "badge invalid", title: s.damage }, "damaged")] : [
      el("span", { className: "counts" },
        plural(s.head_seq, "event") + " · " + plural(s.turn, "turn") + " · " + plural(s.roots, "root") +
        (tail > 0 && s.roots > 0 ? " · tail " + num(tail) : "")),
      s.last_time ? el("span", { className: "when" }, "last ", timeEl(s.last_time, true)) : null,
      s.refused_to > s.compacted_to ? [" ", el("span", { className: "badge refused",
        title: "the compaction of seq " + (s.compacted_to + 1) + ".." + s.refused_to + " was refused" }, "refused")] : null,
      s.open > 0 ? [" ", el("span", { className: "badge open", title: "calls or resources open at the head" }, num(s.open) + " open")] : null]);
  b.setAttribute("aria-current", s.id === state.session ? "true" : "false");
  b.addEventListener("click", () => select(s.id));
  return el("li", {}, b);
}

// timeEl shows an RFC 3339 time in the browser's zone: the time of day, and
// the date too when long says so; the whole time in its title.
function timeEl(iso, long) {
  const t = new Date(iso);
  const text = long ? t.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" }) : t.toLocaleTimeString("en-GB");
  return el("time", { dateTime: iso, title: iso }, text);
}

function select(id) {
  state.session = id;
  state.sessionText = "";
  state.doc = null;
  state.nodesKey = "";
  state.nodes = [];
  state.contextSHA = "";
  state.tl = { from: null, to: null, q: "", marked: false, item: null, focus: 0, doc: null, head: -1, asked: 0 };
  state.open.clear();
  setHash();
  drawSessions();
  if (!id) document.getElementById("detail").replaceChildren(el("p", { id: "hint" }, "Select a session."));
  poll();
}

function drawError(text) {
  document.getElementById("detail").replaceChildren(el("p", { className: "invalid card", id: "session-error" }, text));
}

// ---- One session ----

function section(id, title, count, ...body) {
  return el("section", { id }, el("h3", {}, title, count === null ? null : [" ", el("span", { className: "n" }, "(" + count + ")")]), ...body);
}

function table(head, rows, empty) {
  if (rows.length === 0) return el("p", { className: "note" }, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, head.map(([h, cls]) => el("th", { className: cls || "" }, h)))),
    el("tbody", {}, rows));
}

const td = (v, cls) => el("td", { className: cls || "" }, v);

// seqLink is a link that shows event seq in the timeline.
function seqLink(seq, label) {
  return el("a", { href: "#", className: "seq", title: "show seq " + seq + " in the timeline",
    onclick: (ev) => { ev.preventDefault(); jumpTo(seq); } }, label || "seq " + num(seq));
}

// forkPoint names the parent's state a fork took, as the CLI does
// (checkpoint.Fork.Point).
function forkPoint(f) {
  if (!f.fork_checkpoint) return "marker " + f.fork_marker;
  return "checkpoint " + f.fork_checkpoint + (f.fork_marker ? " (marker " + f.fork_marker + " not valid)" : " (no valid marker)");
}

// drawSkeleton lays out a newly selected session's sections, which the
// polls then fill.
function drawSkeleton(d) {
  const nav = el("nav", { className: "jump" }, ["timeline", "summaries", "resume", "refusals", "markers", "checkpoints"].map((s) =>
    el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); document.getElementById(s).scrollIntoView(); } }, s)));
  const search = el("input", { id: "tl-q", type: "search", placeholder: "search this session's events", autocomplete: "off", spellcheck: false });
  search.addEventListener("change", () => { state.tl.q = search.value; state.tl.from = state.tl.to = null; state.tl.focus = 0; loadTimeline(); });
  const marked = el("input", { id: "tl-marked", type: "checkbox" });
  marked.addEventListener("change", () => { state.tl.marked = marked.checked; state.tl.from = state.tl.to = null; state.tl.focus = 0; loadTimeline(); });
  const jump = el("input", { id: "tl-seq", type: "number", min: 1, placeholder: "seq", className: "seqbox" });
  jump.addEventListener("change", () => { if (jump.value) jumpTo(Number(jump.value)); });
  const timeline = section("timeline", "Timeline", null,
    el("div", { className: "toolbar" }, search,
      el("label", {}, marked, " failures and rejections only"),
      el("label", {}, "go to ", jump)),
    el("p", { id: "tl-filter", className: "chip", hidden: true }),
    el("div", { id: "tl-nav", className: "tlnav" }),
    el("ol", { id: "events" }),
    el("div", { id: "tl-nav-bottom", className: "tlnav" }));
  state.drawn.clear();
  document.getElementById("detail").replaceChildren(
    el("h2", { id: "session-title" }, shown(d.id)),
    el("p", { className: "facts", id: "session-head" }),
    el("p", { className: "facts", id: "lineage" }),
    el("div", { id: "open-calls" }),
    nav,
    el("div", { id: "frame" }),
    timeline,
    section("summaries", "Summaries", null, el("div", { id: "nodes" })),
    el("div", { id: "resume" }),
    el("div", { id: "refusals" }),
    el("div", { id: "markers" }),
    el("div", { id: "checkpoints" }));
}

// part draws one part of the session view when the data it is drawn from
// changed since it was last drawn. A poll redraws nothing else: a part
// replaced while a person clicks in it would lose the click (pressed on the
// old element, released on its replacement).
function part(id, data, draw) {
  const key = JSON.stringify(data);
  if (state.drawn.get(id) === key) return;
  state.drawn.set(id, key);
  draw();
}

// drawSession draws the parts of one session's document (the session
// endpoint's JSON) into the skeleton, each only when its data changed.
function drawSession(d) {
  const info = d.info;
  const it = state.sessions.find((s) => s.id === d.id) || {};
  part("session-head", [info, it.first_time, it.last_time], () => drawHead(info, it));
  part("lineage", [info.fork, d.forks, d.forks_error], () => drawLineage(info.fork, d.forks, d.forks_error));
  part("open-calls", d.open, () => drawOpenCalls(d.open));
  part("frame", [info.head_seq, d.tiers, d.roots, d.tail], () => drawFrame(d));
  part("resume", d.resume, () => drawResume(d.resume));
  part("refusals", d.refusals, () => drawRefusals(d.refusals));
  part("markers", d.markers, () => drawMarkers(d.markers));
  part("checkpoints", d.checkpoints, () => drawCheckpoints(d.checkpoints));
}

function drawHead(info, it) {
  const facts = [
    "head seq " + num(info.head_seq), "turn " + num(info.turn), "frame version " + num(info.frame_version),
    "compacted to seq " + num(info.compacted_to),
  ];
  if (info.refused_to > info.compacted_to) facts.push("refused to seq " + num(info.refused_to));
  if (info.fold_refused_to) facts.push("fold refused to seq " + num(info.fold_refused_to));
  put(document.getElementById("session-head"), facts.join(" · "),
    it.first_time && it.last_time ? [" · ", timeEl(it.first_time, true), " – ", timeEl(it.last_time, true)] : null);
}

// drawLineage shows where a fork came from, and the forks of this session,
// each a link to its view, or why they are unknown.
function drawLineage(f, forks, forksError) {
  const go = (id) => el("a", { href: "#", className: "session-link", onclick: (ev) => { ev.preventDefault(); select(id); } }, shown(id));
  const lineage = document.getElementById("lineage");
  lineage.hidden = !f && forks.length === 0 && !forksError;
  put(lineage,
    f ? ["fork of ", go(f.parent), " at seq " + num(f.fork_seq) + ", " + forkPoint(f)] : null,
    f && (forks.length || forksError) ? " · " : null,
    forks.length ? [plural(forks.length, "fork") + ": ", forks.map((id, i) => [i ? ", " : "", go(id)])] : null,
    forksError ? el("span", { className: "invalid" }, "forks unknown: " + forksError) : null);
}

function drawOpenCalls(open) {
  document.getElementById("open-calls").replaceChildren(open.length === 0 ? "" :
    el("p", { className: "opens" }, el("span", { className: "badge open" }, plural(open.length, "open call")), " at the head: ",
      open.map((o, i) => [i ? ", " : "", el("code", {}, shown(o.name ? o.name + " " + o.id : o.id)), " ", o.seq ? seqLink(o.seq) : ""])));
}

// drawFrame shows the frame: nodes per depth, then the roots and the tail
// along the log.
function drawFrame(d) {
  const info = d.info;
  const tiers = el("div", { className: "tiers" },
    d.tiers.map((t) => [
      el("span", { className: "depth" }, "L" + t.depth),
      el("span", {}, plural(t.nodes, "node") + " · " + plural(t.roots, "root") +
        (t.superseded ? " · " + num(t.superseded) + " superseded" : "")),
    ]),
    el("span", { className: "depth" }, "L0"),
    el("span", { id: "tail" }, d.tail.events > 0
      ? plural(info.head_seq, "event") + "; uncompacted tail " + seqs(d.tail.from, d.tail.to) + ", " + plural(d.tail.events, "event")
      : plural(info.head_seq, "event") + "; no uncompacted tail"));
  const segs = d.roots.map((r) => {
    const s = el("a", { href: "#node-" + r.node, className: "seg " + (r.depth <= 4 ? "d" + r.depth : "deep"),
      title: "L" + r.depth + " node " + r.node + ", " + seqs(r.from, r.to),
      onclick: (ev) => { ev.preventDefault(); showNode(r.node); } },
      el("b", {}, "L" + r.depth + " #" + r.node), el("br"), seqs(r.from, r.to));
    s.style.flexGrow = String(r.to - r.from + 1);
    return s;
  });
  if (d.tail.events > 0) {
    const s = el("a", { href: "#", className: "seg tail", title: "uncompacted tail, " + seqs(d.tail.from, d.tail.to),
      onclick: (ev) => { ev.preventDefault(); jumpTo(d.tail.from); } },
    el("b", {}, "tail"), el("br"), seqs(d.tail.from, d.tail.to));
    s.style.flexGrow = String(d.tail.events);
    segs.push(s);
  }
  document.getElementById("frame").replaceChildren(section("frame-s", "Frame", plural(d.roots.length, "root"),
    el("div", { className: "card" }, tiers, segs.length ? el("div", { className: "bar" }, segs) : null)));
}

// drawResume shows the resumed context: where it comes from, and its text
// as the agent gets it (loadContext fills it in).
function drawResume(r) {
  const source = r.source === "marker" ? "marker " + r.marker : "checkpoint " + r.checkpoint;
  const pre = document.getElementById("context-text") || el("pre", { id: "context-text", className: "context" });
  document.getElementById("resume").replaceChildren(section("resume-s", "Resumed context", null, el("div", { className: "card" },
    el("dl", { className: "kv" },
      el("dt", {}, "source"), el("dd", { id: "resume-source" }, source),
      r.reason ? [el("dt", {}, "reason"), el("dd", {}, shown(r.reason))] : null,
      el("dt", {}, "sha256"), el("dd", { className: "mono", id: "resume-sha" }, r.sha256),
      el("dt", {}, "summarized"), el("dd", {}, r.boundary ? "seq 1.." + num(r.boundary) + " in " + plural(r.nodes, "node") : "nothing"),
      el("dt", {}, "raw"), el("dd", {}, plural(r.events, "event") + " up to head seq " + num(r.head_seq) + " · " + plural(r.bytes, "byte"))),
    el("p", { className: "note" }, "The text below is what an agent resuming now is handed, byte for byte (resume?format=text)."),
    pre)));
}

// drawRefusals shows the refused compactions, newest first; each item a
// link to the events of the span that name it.
function drawRefusals(rf) {
  document.getElementById("refusals").replaceChildren(section("refusals-s", "Refused compactions", num(rf.total),
    rf.total > rf.shown.length ? el("p", { className: "note" }, "the last " + num(rf.shown.length) + " of " + num(rf.total)) : null,
    table([["#", "num"], ["depth"], ["span"], ["summarizer"], ["attempt", "num"], ["fell back to"], ["what it left out"]],
      rf.shown.slice().reverse().map((x) => el("tr", { id: "refusal-" + x.id },
        td(num(x.id), "num"), td("L" + x.depth), td(seqs(x.from, x.to), "nowrap"), td(shown(x.summarizer)), td(num(x.attempt), "num"),
        td("checkpoint " + x.checkpoint, "nowrap"),
        td(el("ul", {}, x.failures.map((f) => el("li", {},
          el("span", { className: "badge refused" }, f.class), " ",
          el("a", { href: "#", className: "item", title: "the events of seq " + x.from + ".." + x.to + " that name it",
            onclick: (ev) => { ev.preventDefault(); filterItem(f.item, x.from, x.to); } }, el("code", {}, shown(f.item))),
          f.detail ? [" — ", shown(f.detail)] : "")))))),
      "none: every compaction asked for was committed")));
}

// drawMarkers and drawCheckpoints show the current ones; the invalidated
// ones — the history of folds and re-compactions — on demand.
function drawMarkers(mk) {
  const markerRow = (m) => el("tr", {},
    td(num(m.id), "num"), td(el("a", { href: "#node-" + m.node, onclick: (ev) => { ev.preventDefault(); showNode(m.node); } }, "#" + m.node), "num"),
    td("L" + m.depth), td(num(m.boundary), "num"),
    td([el("span", { className: "badge " + (m.status === "valid" ? "valid" : "stale") }, m.status),
      m.unchecked ? [" ", el("span", { className: "badge refused" }, "unchecked")] : null]),
    td(shown(m.reason || "")));
  const mHead = [["#", "num"], ["node", "num"], ["depth"], ["boundary", "num"], ["status"], ["reason"]];
  const validM = mk.shown.filter((m) => m.status === "valid").reverse();
  const oldM = mk.shown.filter((m) => m.status !== "valid").reverse();
  document.getElementById("markers").replaceChildren(section("markers-s", "Markers", num(mk.valid) + " valid, " + num(mk.invalid) + " invalid",
    table(mHead, validM.map(markerRow), "no valid marker"),
    mk.invalid ? details("marker-history", false,
      "history: " + plural(mk.invalid, "marker") + " invalidated as the frame changed (folds, re-compactions)",
      () => historyBox("markers", mk, oldM, (all) => table(mHead, all.map(markerRow), ""))) : null));
}

function drawCheckpoints(ck) {
  const ckRow = (c) => el("tr", {},
    td(num(c.id), "num"), td(c.seq ? seqLink(c.seq, num(c.seq)) : "0", "num"), td((c.prefix || []).length ? "nodes " + c.prefix.join(", ") : "none"),
    td(el("span", { className: "badge " + (c.status === "valid" ? "valid" : "stale") }, c.status)), td(shown(c.why)), td(shown(c.reason || "")));
  const cHead = [["#", "num"], ["after seq", "num"], ["prefix"], ["status"], ["why"], ["reason"]];
  const validC = ck.shown.filter((c) => c.status === "valid").reverse();
  const oldC = ck.shown.filter((c) => c.status !== "valid").reverse();
  document.getElementById("checkpoints").replaceChildren(section("checkpoints-s", "Checkpoints", num(ck.valid) + " valid, " + num(ck.invalid) + " invalid",
    table(cHead, validC.map(ckRow), "no valid checkpoint"),
    ck.invalid ? details("checkpoint-history", false,
      "history: " + plural(ck.invalid, "checkpoint") + " invalidated as the frame changed",
      () => historyBox("checkpoints", ck, oldC, (all) => table(cHead, all.map(ckRow), ""))) : null));
}

// historyBox shows the invalidated markers or checkpoints (what names which)
// the session document lists, the newest first, and when it lists only the
// last ones, a button that reads them all (session?history=all).
function historyBox(what, list, shownOld, draw) {
  const box = el("div", { className: "history" }, draw(shownOld));
  if (shownOld.length >= list.invalid) return box;
  const b = el("button", { type: "button", className: "all" }, "the last " + num(shownOld.length) + " of " + num(list.invalid) + " listed: show all");
  b.addEventListener("click", async () => {
    try {
      const d = JSON.parse(await get("session?" + q({ session: state.session, history: "all" })));
      box.replaceChildren(draw(d[what].shown.filter((x) => x.status !== "valid").reverse()));
    } catch (e) { b.textContent = "not loaded: " + e.message; }
  });
  box.prepend(el("p", { className: "note" }, b));
  return box;
}

// loadContext fetches the context text, once per sha256.
async function loadContext(sha) {
  const pre = document.getElementById("context-text");
  try {
    const text = await get("resume?" + q({ format: "text", session: state.session }));
    if (pre && pre.isConnected) { pre.replaceChildren(...shown(text)); pre.dataset.text = text.length; }
    state.contextSHA = sha;
  } catch (e) {
    if (pre) pre.textContent = "not loaded: " + e.message;
  }
}

// ---- Summaries ----

// SEQ_FIELDS are the fields of a claim that name an event's seq.
const SEQ_FIELDS = new Set(["seq", "at", "failed_at", "opener"]);

// claimLine shows one claim, whatever its class: each field as name=value,
// the seqs as links into the timeline.
function claimLine(c) {
  if (typeof c !== "object" || c === null) return el("li", {}, shown(JSON.stringify(c)));
  return el("li", {}, Object.entries(c).map(([k, v], i) => [i ? " " : "",
    el("span", { className: "k" }, k + "="),
    SEQ_FIELDS.has(k) && typeof v === "number" && v > 0 ? seqLink(v, String(v)) :
      el("code", {}, shown(typeof v === "string" ? v : JSON.stringify(v)))]));
}

// nodeCard shows a summary node: its span and place in the frame, its
// narrative (the summarizer's words, which nothing checks) and its claims
// (checked against the raw log when it was committed, unless unchecked).
function nodeCard(n) {
  const claims = Object.entries(n.claims || {}).filter(([, v]) => Array.isArray(v) ? v.length : v !== null && v !== undefined);
  const count = claims.reduce((a, [, v]) => a + (Array.isArray(v) ? v.length : 1), 0);
  const where = n.superseded_by ? ["superseded by ", nodeLink(n.superseded_by)] : n.parent ? ["folded into ", nodeLink(n.parent)] : "root";
  return el("article", { className: "node card" + (n.superseded_by || n.parent ? " old" : ""), id: "node-" + n.id, dataset: { node: n.id } },
    el("div", { className: "nhead" }, el("b", {}, "L" + n.depth + " #" + n.id), " · ", el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); jumpTo(n.from); } }, seqs(n.from, n.to)),
      " · ", where, " · ", shown(n.summarizer), " · " + num(n.tokens) + " of " + num(n.budget) + " tokens",
      (n.children || []).length ? [" · children ", n.children.map((c, i) => [i ? ", " : "", nodeLink(c)])] : null,
      n.repairs ? " · repairs refusal " + n.repairs : null),
    el("div", { className: "label unchecked-label" }, "narrative — the summarizer's words, unchecked"),
    textBlock(n.narrative, 0, "narrative"),
    el("div", { className: "label " + (n.unchecked ? "unchecked-label" : "verified-label") },
      n.unchecked ? "claims — committed unchecked: the summarizer's, not verified" : "verified claims — each checked against the raw log at commit",
      " (" + num(count) + ")"),
    count === 0 ? el("p", { className: "note" }, "none") :
      el("div", { className: "claims" }, claims.map(([cls, v]) => el("div", { className: "claim-class", dataset: { class: cls } },
        el("span", { className: "cls" }, cls), el("ul", {}, (Array.isArray(v) ? v : [v]).map(claimLine))))));
}

function nodeLink(id) {
  return el("a", { href: "#node-" + id, onclick: (ev) => { ev.preventDefault(); showNode(id); } }, "#" + id);
}

// drawNodes shows the roots (the frame a resume reads) and, on demand,
// every node the session ever committed.
function drawNodes() {
  const roots = state.nodes.filter((n) => !n.parent && !n.superseded_by);
  const others = state.nodes.length - roots.length;
  document.querySelector("#summaries h3").replaceChildren("Summaries ", el("span", { className: "n" }, "(" + plural(roots.length, "root") + " of " + plural(state.nodes.length, "node") + ")"));
  put(document.getElementById("nodes"),
    roots.length === 0 ? el("p", { className: "note" }, "no summary yet: the whole log is raw") : null,
    roots.map(nodeCard),
    others ? details("node-history", false, "history: " + plural(others, "node") + " folded into a deeper one or superseded",
      () => state.nodes.filter((n) => n.parent || n.superseded_by).map(nodeCard)) : null);
}

// showNode scrolls to node id's card, opening the history if it is there.
function showNode(id) {
  let card = document.getElementById("node-" + id);
  if (!card) {
    const h = document.getElementById("node-history");
    if (h) { h.open = true; card = document.getElementById("node-" + id); }
  }
  if (card) { card.scrollIntoView({ block: "start" }); flash(card); }
}

function flash(e) {
  e.classList.remove("focus");
  void e.offsetWidth; // restart the animation
  e.classList.add("focus");
}

// ---- The timeline ----

// following reports whether the timeline shows the head's end, which a poll
// refreshes as the agent appends.
const following = () => state.tl.from === null && state.tl.to === null && !state.tl.item;

// loadTimeline fetches the timeline's window and draws it.
async function loadTimeline() {
  const tl = state.tl;
  const id = state.session;
  const asked = ++tl.asked;
  const params = { session: id, q: tl.q, marked: tl.marked ? 1 : null, from: tl.from, to: tl.to };
  if (tl.item) Object.assign(params, { item: tl.item.item, from: tl.item.from, to: tl.item.to, limit: 1000 });
  const text = await get("events?" + q(params));
  // An answer to an earlier request (a poll's window at the head, asked
  // before a click asked for another) would overwrite the window asked for.
  if (id !== state.session || tl !== state.tl || asked !== tl.asked) return;
  tl.doc = JSON.parse(text);
  tl.head = tl.doc.head_seq;
  drawTimeline();
}

function reloadTimeline() {
  loadTimeline().catch((e) => setStatus("not updated: " + e.message, true));
}

// jumpTo shows a window of the timeline around seq, without filters, and
// marks the event.
function jumpTo(seq) {
  Object.assign(state.tl, { from: Math.max(1, seq - 10), to: null, q: "", marked: false, item: null, focus: seq });
  document.getElementById("tl-q").value = "";
  document.getElementById("tl-marked").checked = false;
  reloadTimeline();
}

// filterItem shows the events of seq from..to that name item: a refusal's
// link.
function filterItem(item, from, to) {
  Object.assign(state.tl, { from: null, to: null, item: { item, from, to }, focus: 0 });
  reloadTimeline();
  document.getElementById("timeline").scrollIntoView();
}

// drawTimelineNav draws the window's place and the buttons that move it.
function drawTimelineNav() {
  const tl = state.tl, d = tl.doc;
  if (!d) return;
  const head = state.doc ? state.doc.info.head_seq : d.head_seq;
  const evs = d.events;
  const first = evs.length ? evs[0].seq : 0, last = evs.length ? evs[evs.length - 1].seq : 0;
  const filtered = tl.q || tl.marked || tl.item;
  const btn = (label, id, enabled, fn) => el("button", { type: "button", className: id, disabled: !enabled, onclick: fn }, label);
  // Before and after count within the range asked for: a window that
  // starts at a seq may have older events before it, and one that ends at a
  // seq newer ones after it.
  const older = d.before > 0 || (!tl.item && first > 1);
  const newer = d.after > 0 || (!tl.item && last > 0 && last < d.head_seq);
  const nav = () => el("span", { className: "btns" },
    btn("⇤ first", "tl-first", older, () => { Object.assign(tl, { from: 1, to: null, focus: 0 }); reloadTimeline(); }),
    btn("‹ older", "tl-older", older, () => { Object.assign(tl, { from: null, to: first - 1, focus: 0 }); reloadTimeline(); }),
    btn("newer ›", "tl-newer", newer, () => { Object.assign(tl, { from: last + 1, to: null, focus: 0 }); reloadTimeline(); }),
    btn("latest ⇥", "tl-latest", !following(), () => { Object.assign(tl, { from: null, to: null, item: null, focus: 0 }); reloadTimeline(); }));
  const where = evs.length === 0 ? (filtered ? "no event matches" : "no events") :
    (filtered ? plural(evs.length, "matching event") + ", " : plural(evs.length, "event") + ": ") + seqs(first, last) +
    " of " + num(head) + (filtered && d.before ? " · " + num(d.before) + " earlier matches" : "") +
    (filtered && d.after ? " · " + num(d.after) + " later matches" : "");
  const live = following() ? el("span", { className: "badge valid" }, "following the head") :
    head > d.head_seq ? el("span", { className: "badge open" }, num(head - d.head_seq) + " new since") : null;
  put(document.getElementById("tl-nav"), el("span", { id: "tl-where" }, where), " ", live, nav());
  document.getElementById("tl-nav-bottom").replaceChildren(nav());
  const chip = document.getElementById("tl-filter");
  chip.hidden = !tl.item;
  if (tl.item) {
    chip.replaceChildren("events naming ", el("code", {}, shown(tl.item.item)), " in " + seqs(tl.item.from, tl.item.to) + " ",
      el("button", { type: "button", onclick: () => { tl.item = null; reloadTimeline(); } }, "✕ clear"));
  }
}

// drawTimeline draws the window's events: each tool call with its result
// when both are in it, a rule where the summary covering them changes.
function drawTimeline() {
  const d = state.tl.doc;
  drawTimelineNav();
  const roots = state.doc ? state.doc.roots : [];
  const bySeq = new Map(d.events.map((e) => [e.seq, e]));
  const nested = new Set();
  for (const e of d.events) {
    if ((e.kind === "tool_result" || e.kind === "close") && e.opener && bySeq.has(e.opener)) nested.add(e.seq);
  }
  const results = new Map(d.events.filter((e) => nested.has(e.seq)).map((e) => [e.opener, e]));
  const items = [];
  let cover = undefined;
  let day = "";
  for (const e of d.events) {
    if (nested.has(e.seq)) continue;
    const r = roots.find((x) => x.from <= e.seq && e.seq <= x.to) || null;
    if (cover === undefined || r !== cover) {
      cover = r;
      items.push([["rule", e.seq, r], () => el("li", { className: "rule" }, r ?
        ["covered by ", el("a", { href: "#node-" + r.node, onclick: (ev) => { ev.preventDefault(); showNode(r.node); } }, "L" + r.depth + " #" + r.node), " (" + seqs(r.from, r.to) + ")"] :
        "uncompacted tail: raw in the resumed context")]);
    }
    if (e.time && e.time.slice(0, 10) !== day) {
      day = e.time.slice(0, 10);
      const t = e.time;
      items.push([["day", e.seq, day], () => el("li", { className: "day" }, new Date(t).toLocaleDateString("en-GB", { dateStyle: "full" }))]);
    }
    const result = results.get(e.seq);
    items.push([["event", e, result || null], () => eventItem(e, result)]);
  }
  // A window that follows the head gains the new events and keeps the
  // others' elements: a text a person opened stays open.
  keep(document.getElementById("events"), items);
  if (state.tl.focus) {
    const f = document.getElementById("ev-" + state.tl.focus);
    if (f) { f.scrollIntoView({ block: "center" }); flash(f); }
  }
}

// eventItem shows one event, and the result of a call beneath it.
function eventItem(e, result) {
  return el("li", { className: "event k-" + e.kind + (isMarked(e) || (result && isMarked(result)) ? " marked" : ""), id: "ev-" + e.seq, dataset: { seq: e.seq, kind: e.kind } },
    eventHead(e), eventBody(e),
    result ? el("div", { className: "result" + (isMarked(result) ? " marked" : ""), id: "ev-" + result.seq, dataset: { seq: result.seq, kind: result.kind } },
      eventHead(result, true), eventBody(result)) : null);
}

const isMarked = (e) => e.ok === false || ["rejected", "failed", "superseded"].includes(e.kind);

function eventHead(e, inCall) {
  const tags = [];
  if (e.ok === false) tags.push(el("span", { className: "badge invalid" }, e.kind === "close" ? "failed" : "failed call"));
  if (e.ok === true && e.kind === "tool_result") tags.push(el("span", { className: "badge valid" }, "ok"));
  if (e.kind === "rejected" || e.kind === "failed") tags.push(el("span", { className: "badge invalid" }, e.kind));
  if (e.kind === "superseded") tags.push(el("span", { className: "badge stale" }, "superseded"));
  if (e.open) tags.push(el("span", { className: "badge open", title: "still open at the head" }, "open"));
  const name = e.kind === "tool_call" || e.kind === "open" ? [el("b", {}, shown(e.name || "")), " ", el("code", { className: "id" }, shown(e.id))] :
    e.kind === "tool_result" || e.kind === "close" ? [el("code", { className: "id" }, shown(e.id)),
      e.opener && !inCall ? [" of the call at ", seqLink(e.opener)] : null] :
      e.key ? el("code", { className: "key" }, shown(e.key)) : null;
  return el("div", { className: "head" },
    el("a", { href: "#", className: "seqno", title: "seq " + e.seq + ", turn " + e.turn, onclick: (ev) => { ev.preventDefault(); jumpTo(e.seq); } }, num(e.seq)),
    e.time ? timeEl(e.time, false) : el("span", { className: "notime" }, "no time"),
    el("span", { className: "kind" }, e.kind), name, e.by ? [" → ", el("code", {}, shown(e.by))] : null, tags);
}

function eventBody(e) {
  if (!e.text && !e.text_bytes) return null;
  return textBlock(e.text, e.text_bytes || 0, e.kind === "tool_call" ? "input" : e.kind === "tool_result" ? "output" : "", e.seq);
}

// textBlock shows a stored text; a long one collapsed to its first lines
// until opened. clipped is the whole text's length when the server sent
// only its start: opening it fetches the rest.
function textBlock(text, clipped, label, seq) {
  const lines = text.split("\n");
  const long = clipped > 0 || text.length > PREVIEW_CHARS || lines.length > PREVIEW_LINES;
  const pre = el("pre", { className: "text" + (label ? " " + label : "") });
  if (!long) { pre.append(...shown(text)); return pre; }
  const preview = lines.slice(0, PREVIEW_LINES).join("\n").slice(0, PREVIEW_CHARS);
  pre.append(...shown(preview), el("span", { className: "more" }, " …"));
  pre.classList.add("collapsed");
  const size = clipped || new TextEncoder().encode(text).length;
  const b = el("button", { type: "button", className: "expand" }, "show all " + (clipped ? "" : plural(lines.length, "line") + ", ") + plural(size, "byte"));
  b.addEventListener("click", async () => {
    let whole = text;
    if (clipped) {
      try {
        const doc = JSON.parse(await get("events?" + q({ session: state.session, from: seq, to: seq, clip: 0 })));
        whole = doc.events[0].text;
      } catch (e) { b.textContent = "not loaded: " + e.message; return; }
    }
    pre.classList.remove("collapsed");
    pre.replaceChildren(...shown(whole));
    b.remove();
  });
  return el("div", { className: "long" }, pre, b);
}

// ---- Wiring ----

for (const id of ["filter", "f-refused", "f-open", "f-recent"]) {
  document.getElementById(id).addEventListener("input", drawSessions);
}
document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.token = document.getElementById("token").value;
  sessionStorage.setItem(TOKEN_KEY, state.token);
  poll();
});
window.addEventListener("hashchange", () => {
  const before = state.session;
  readHash();
  if (state.session !== before) select(state.session);
});
readHash();
poll();
