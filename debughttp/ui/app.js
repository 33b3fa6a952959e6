// The strata page: it polls the handler's JSON endpoints and shows what
// they say. Everything read from the database is written into the page as
// text (text nodes, attribute values), never as markup.
"use strict";

const POLL_MS = 1500; // the wait between the end of one poll and the next
const TOKEN_KEY = "strata-token";
const api = new URL("../", location.href); // the endpoints: the page is at {prefix}/ui/

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  session: "",      // the selected session's id
  indexText: "",    // the last index, as received: unchanged means nothing to redraw
  sessionText: "",  // the last session document, as received
  sessions: [],
  contextSHA: "",   // the sha256 of the context text shown, if any
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
    else e[k] = v;
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const num = (n) => Number(n).toLocaleString("en-US");
const plural = (n, one, many) => num(n) + " " + (n === 1 ? one : (many || one + "s"));

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
  constructor(status, message) { super(message); this.status = status; }
}

// get fetches an endpoint below the prefix and returns its body as text.
async function get(path) {
  const headers = {};
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const resp = await fetch(new URL(path, api), { headers, cache: "no-store" });
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error || text; } catch (_) { /* not JSON: as it is */ }
    throw new HTTPError(resp.status, resp.status + " " + resp.statusText + ": " + msg);
  }
  return text;
}

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

// poll reads the index and the selected session, redraws what changed and
// schedules the next poll. One poll runs at a time: asked for while one
// runs, it runs again right after.
async function poll() {
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  clearTimeout(state.timer);
  try {
    const indexText = await get("./");
    if (indexText !== state.indexText) {
      state.indexText = indexText;
      const idx = JSON.parse(indexText);
      state.sessions = idx.sessions;
      document.getElementById("where").textContent = api.host + api.pathname + " · format " + idx.format_version;
      if (!state.session && idx.sessions.length === 1) {
        state.session = idx.sessions[0].id;
        setHash();
      }
      drawSessions();
    }
    const id = state.session;
    if (id) {
      const text = await get("session?session=" + encodeURIComponent(id));
      if (id === state.session && text !== state.sessionText) {
        state.sessionText = text;
        drawSession(JSON.parse(text));
      }
    }
    document.getElementById("token-form").hidden = true;
    setStatus("live · updated " + new Date().toLocaleTimeString("en-GB"), false);
  } catch (e) {
    if (e instanceof HTTPError && e.status === 401) {
      askToken(state.token ? "the token was refused" : "");
    }
    if (e instanceof HTTPError && e.status === 404 && state.session) {
      state.sessionText = "";
      drawError("Session " + JSON.stringify(state.session) + ": " + e.message);
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

// drawSessions draws the list of sessions that match the filter.
function drawSessions() {
  const filter = document.getElementById("filter").value.trim().toLowerCase();
  const shown = state.sessions.filter((s) => s.id.toLowerCase().includes(filter));
  document.getElementById("count").textContent =
    plural(state.sessions.length, "session") + (filter ? ", " + num(shown.length) + " match" : "");
  const items = shown.map((s) => {
    const tail = s.head_seq - s.compacted_to;
    const b = el("button", { type: "button", dataset: { session: s.id } },
      el("span", { className: "id" }, s.id),
      el("span", { className: "counts" },
        plural(s.head_seq, "event") + " · " + plural(s.turn, "turn") + " · " + plural(s.roots, "root") +
        (tail > 0 && s.roots > 0 ? " · tail " + num(tail) : "")),
      s.refused_to > s.compacted_to ? [" ", el("span", { className: "badge refused",
        title: "the compaction of seq " + (s.compacted_to + 1) + ".." + s.refused_to + " was refused" }, "refused")] : null);
    b.setAttribute("aria-current", s.id === state.session ? "true" : "false");
    b.addEventListener("click", () => select(s.id));
    return el("li", {}, b);
  });
  document.getElementById("sessions").replaceChildren(...items);
}

function select(id) {
  state.session = id;
  state.sessionText = "";
  state.contextSHA = "";
  setHash();
  drawSessions();
  if (!id) document.getElementById("detail").replaceChildren(el("p", { id: "hint" }, "Select a session."));
  poll();
}

function drawError(text) {
  document.getElementById("detail").replaceChildren(el("p", { className: "invalid card", id: "session-error" }, text));
}

function section(id, title, count, ...body) {
  return el("section", { id }, el("h3", {}, title, count === null ? null : [" ", el("span", { className: "n" }, "(" + count + ")")]), ...body);
}

function badge(status) {
  return el("span", { className: "badge " + (status === "valid" ? "valid" : "invalid") }, status);
}

function table(head, rows, empty) {
  if (rows.length === 0) return el("p", { className: "note" }, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, head.map(([h, cls]) => el("th", { className: cls || "" }, h)))),
    el("tbody", {}, rows));
}

const td = (v, cls) => el("td", { className: cls || "" }, v);
const seqs = (from, to) => from <= to ? "seq " + num(from) + ".." + num(to) : "none";

// drawSession draws one session's document (the session endpoint's JSON).
function drawSession(d) {
  const info = d.info;
  const facts = [
    "head seq " + num(info.head_seq), "turn " + num(info.turn), "frame version " + num(info.frame_version),
    "compacted to seq " + num(info.compacted_to),
  ];
  if (info.refused_to > info.compacted_to) facts.push("refused to seq " + num(info.refused_to));
  if (info.fold_refused_to) facts.push("fold refused to seq " + num(info.fold_refused_to));
  const head = [
    el("h2", { id: "session-title" }, d.id),
    el("p", { className: "facts", id: "session-head" }, facts.join(" · ")),
  ];

  // The frame: nodes per depth, then the roots and the tail along the log.
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
    const s = el("div", { className: "seg " + (r.depth <= 4 ? "d" + r.depth : "deep"),
      title: "L" + r.depth + " node " + r.node + ", " + seqs(r.from, r.to) },
      el("b", {}, "L" + r.depth + " #" + r.node), el("br"), seqs(r.from, r.to));
    s.style.flexGrow = String(r.to - r.from + 1);
    return s;
  });
  if (d.tail.events > 0) {
    const s = el("div", { className: "seg tail", title: "uncompacted tail, " + seqs(d.tail.from, d.tail.to) },
      el("b", {}, "tail"), el("br"), seqs(d.tail.from, d.tail.to));
    s.style.flexGrow = String(d.tail.events);
    segs.push(s);
  }
  const frame = section("frame", "Frame", plural(d.roots.length, "root"),
    el("div", { className: "card" }, tiers, segs.length ? el("div", { className: "bar" }, segs) : null));

  // The resumed context.
  const r = d.resume;
  const source = r.source === "marker" ? "marker " + r.marker : "checkpoint " + r.checkpoint;
  const ctxPre = el("pre", { id: "context-text" }, "");
  const details = el("details", { id: "context" }, el("summary", {}, "the context text"), ctxPre);
  details.addEventListener("toggle", () => {
    if (details.open) loadContext(ctxPre, r.sha256);
    else state.contextSHA = "";
  });
  if (state.contextSHA) details.open = true; // kept open across redraws: its toggle event reloads it
  const resume = section("resume", "Resumed context", null, el("div", { className: "card" },
    el("dl", { className: "kv" },
      el("dt", {}, "source"), el("dd", { id: "resume-source" }, source),
      r.reason ? [el("dt", {}, "reason"), el("dd", {}, r.reason)] : null,
      el("dt", {}, "sha256"), el("dd", { className: "mono", id: "resume-sha" }, r.sha256),
      el("dt", {}, "summarized"), el("dd", {}, r.boundary ? "seq 1.." + num(r.boundary) + " in " + plural(r.nodes, "node") : "nothing"),
      el("dt", {}, "raw"), el("dd", {}, plural(r.events, "event") + " up to head seq " + num(r.head_seq) + " · " + plural(r.bytes, "byte"))),
    details));

  // Refused compactions, newest first.
  const rf = d.refusals;
  const refusals = section("refusals", "Refused compactions", num(rf.total),
    rf.total > rf.shown.length ? el("p", { className: "note" }, "the last " + num(rf.shown.length) + " of " + num(rf.total)) : null,
    table([["#", "num"], ["depth"], ["span"], ["summarizer"], ["attempt", "num"], ["fell back to"], ["what it left out"]],
      rf.shown.slice().reverse().map((x) => el("tr", {},
        td(num(x.id), "num"), td("L" + x.depth), td(seqs(x.from, x.to), "nowrap"), td(x.summarizer), td(num(x.attempt), "num"),
        td("checkpoint " + x.checkpoint, "nowrap"),
        td(el("ul", {}, x.failures.map((f) => el("li", {},
          el("span", { className: "badge refused" }, f.class), " ", el("code", {}, f.item), f.detail ? " — " + f.detail : "")))))),
      "none: every compaction asked for was committed"));

  // Markers and checkpoints, newest first.
  const mk = d.markers;
  const markers = section("markers", "Markers", num(mk.valid) + " valid, " + num(mk.invalid) + " invalid",
    mk.invalid + mk.valid > mk.shown.length ? el("p", { className: "note" }, "every valid one and the last " + num(mk.shown.length - mk.valid) + " invalid") : null,
    table([["#", "num"], ["node", "num"], ["depth"], ["boundary", "num"], ["status"], ["reason"]],
      mk.shown.slice().reverse().map((m) => el("tr", {},
        td(num(m.id), "num"), td(num(m.node), "num"), td("L" + m.depth), td(num(m.boundary), "num"),
        td([badge(m.status), m.unchecked ? [" ", el("span", { className: "badge refused" }, "unchecked")] : null]),
        td(m.reason || ""))),
      "none yet"));
  const ck = d.checkpoints;
  const checkpoints = section("checkpoints", "Checkpoints", num(ck.valid) + " valid, " + num(ck.invalid) + " invalid",
    ck.invalid + ck.valid > ck.shown.length ? el("p", { className: "note" }, "every valid one and the last " + num(ck.shown.length - ck.valid) + " invalid") : null,
    table([["#", "num"], ["after seq", "num"], ["prefix"], ["status"], ["why"], ["reason"]],
      ck.shown.slice().reverse().map((c) => el("tr", {},
        td(num(c.id), "num"), td(num(c.seq), "num"), td((c.prefix || []).length ? "nodes " + c.prefix.join(", ") : "none"),
        td(badge(c.status)), td(c.why), td(c.reason || ""))),
      "none"));

  document.getElementById("detail").replaceChildren(...head, frame, resume, refusals, markers, checkpoints);
}

// loadContext fetches the context text into pre, once per sha256.
async function loadContext(pre, sha) {
  if (state.contextSHA === sha && pre.textContent) return;
  try {
    pre.textContent = await get("resume?format=text&session=" + encodeURIComponent(state.session));
    state.contextSHA = sha;
  } catch (e) {
    pre.textContent = "not loaded: " + e.message;
  }
}

document.getElementById("filter").addEventListener("input", drawSessions);
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
