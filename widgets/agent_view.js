// agent_view.js — the front-end of agent_kernel.jupyter.view.AgentView: the live view of one run.
//
// Plain ES module: no imports, no build step, nothing fetched. The wire protocol is described in
// view.py. The kernel draws every item of the run (jupyter/_item_html.py, the drawing the saved
// transcript is made of too); this module keeps the run's state, puts those drawings on the page
// and keeps them current, shows the text still streaming, and adds the controls: approvals, Stop,
// steering, copy buttons, shortcuts, the clock. A sub-agent's items (those whose `agent` is its
// `agent_id`) go inside its card, and its card inside the tool card of the call that started it,
// so nesting goes to any depth.

const STORES = new WeakMap();

// ---------------------------------------------------------------------------------------------
// The run, as the front-end knows it: one store per widget model, shared by all of its views.

class RunStore {
  constructor(model) {
    this.model = model;
    this.v = 0;
    this.items = new Map();
    this.order = [];
    this.status = {};
    this.statusAt = performance.now();
    this.listeners = new Set();
    this.syncing = false;
    this.key = "ak-" + Math.random().toString(36).slice(2);
    this.scrolled = new Set(); // approvals already scrolled into view, by agent and call id
    this.views = 0;
    this.gone = false; // the kernel behind this model has gone (restart, shutdown)
    this.goneAt = 0;
    model.on("msg:custom", (msg) => this.onMessage(msg));
    // The widget manager marks every model's comm dead when its kernel restarts or shuts down
    // (comm_live becomes false, which triggers this event); nothing here answers after that.
    model.on("comm_live_update", () => this.markGone());
    // A finished run's transcript goes in the view's place in the notebook even when the
    // kernel's display update cannot reach this page (reloaded, or the cell long finished).
    model.on("change:saved", () => {
      if ((model.get("saved") || {}).final) keepTranscript(model, false);
    });
    model.on("change:snapshot", () => this.loadSnapshot(model.get("snapshot")));
    this.loadSnapshot(model.get("snapshot"));
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(change) {
    this.trackApprovals();
    for (const listener of this.listeners) listener(change);
  }

  // Sends to the kernel; false (and the view marked gone) when there is no kernel to send to.
  send(msg) {
    if (this.gone) return false;
    try {
      this.model.send(msg);
      return true;
    } catch (err) {
      this.markGone();
      return false;
    }
  }

  markGone() {
    if (this.gone) return;
    this.gone = true;
    this.goneAt = performance.now();
    keepTranscript(this.model, true);
    this.emit({ gone: true, added: [], changed: new Set() });
  }

  awaiting() {
    if (this.gone) return 0;
    let n = 0;
    for (const item of this.items.values()) if (item.status === "awaiting_approval") n++;
    return this.status.phase === "running" ? n : 0;
  }

  trackApprovals() {
    setPending(this.key, this.views > 0 ? this.awaiting() : 0);
  }

  requestSync() {
    if (this.syncing) return;
    this.syncing = true;
    try {
      this.model.send({ type: "sync" });
    } catch (err) {
      this.syncing = false; // no kernel (static export): the snapshot trait is all there is
    }
  }

  loadSnapshot(snapshot) {
    if (snapshot && typeof snapshot.v === "number" && snapshot.v >= this.v && snapshot.status) {
      this.load(snapshot.v, snapshot);
    }
  }

  load(v, state) {
    this.v = v;
    this.items = new Map();
    this.order = [];
    for (const item of state.items || []) {
      this.items.set(item.id, { ...item });
      this.order.push(item.id);
    }
    this.status = { ...(state.status || {}) };
    this.statusAt = performance.now();
    this.emit({ reset: true });
  }

  onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "snapshot") {
      this.syncing = false;
      if (msg.v >= this.v) this.load(msg.v, msg.state || {});
    } else if (msg.type === "batch") {
      if (msg.v <= this.v) return; // already part of a snapshot
      if (msg.v !== this.v + 1) {
        this.requestSync(); // missed a batch (sent before this page existed): start over
        return;
      }
      this.v = msg.v;
      this.emit(this.apply(msg.ops || []));
    }
  }

  apply(ops) {
    const change = { added: [], changed: new Set(), status: false };
    for (const op of ops) {
      if (op.op === "add") {
        if (!this.items.has(op.item.id)) this.order.push(op.item.id);
        this.items.set(op.item.id, { ...op.item });
        change.added.push(op.item.id);
      } else if (op.op === "append") {
        for (const [id, text] of Object.entries(op.texts || {})) {
          const item = this.items.get(id);
          if (item) {
            item.text = (item.text || "") + text;
            change.changed.add(id);
          }
        }
      } else if (op.op === "draw") { // the next finished piece of a block being written
        const item = this.items.get(op.id);
        if (item) {
          (item.pieces ||= []).push(op.html);
          item.drawn = op.drawn;
          change.changed.add(op.id);
        }
      } else if (op.op === "set") {
        const item = this.items.get(op.id);
        if (item) {
          Object.assign(item, op.patch);
          if ("html" in op.patch) item.pieces = []; // drawn whole again
          if (op.edits) item.html = edited(item.html || "", op.edits);
          change.changed.add(op.id);
        }
      } else if (op.op === "status") {
        Object.assign(this.status, op.patch);
        if ("elapsed_s" in op.patch) this.statusAt = performance.now();
        change.status = true;
      }
    }
    return change;
  }

  elapsed() {
    const base = this.status.elapsed_s;
    if (typeof base !== "number") return null;
    if (this.status.phase !== "running") return base;
    const now = this.gone ? this.goneAt : performance.now();
    return base + Math.max(0, now - this.statusAt) / 1000;
  }
}

// A card's drawing changed by the kernel's `edits`: [start, end, html] replacing html.slice(start,
// end), in order (view.py).
function edited(html, edits) {
  let out = "";
  let at = 0;
  for (const [start, end, text] of edits) {
    out += html.slice(at, start) + text;
    at = end;
  }
  return out + html.slice(at);
}

const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";

// Puts the run's static transcript (the `saved` trait: see view.py) where this model's widget
// output is in the notebook the page holds, so the saved notebook keeps a transcript and never
// a bare widget. `cutOff`: the kernel went mid-run; the transcript then says how to go on.
// Works where the widget manager offers its document (JupyterLab, Notebook 7); elsewhere the
// live view stays and says what happened.
function keepTranscript(model, cutOff) {
  const saved = model.get("saved") || {};
  if (!saved.model_id || typeof saved.html !== "string") return false;
  const manager = model.widget_manager;
  let cells = null;
  try {
    cells = manager && manager.context && manager.context.model && manager.context.model.cells;
  } catch (err) {
    return false;
  }
  if (!cells || typeof cells.get !== "function") return false;
  let html = saved.html;
  let text = saved.text || "";
  if (cutOff && !saved.final) {
    const notice = h("div", "ak-kernel-gone", "The " + KERNEL_GONE.slice(4));
    notice.setAttribute("role", "note");
    notice.style.cssText = "margin: 4px 0; padding: 4px 8px; border-left: 3px solid " +
      "var(--jp-warn-color1, #9a6700); color: var(--jp-content-font-color1, inherit);";
    html = notice.outerHTML + html;
    text = "The " + KERNEL_GONE.slice(4) + "\n" + text;
  }
  let kept = false;
  for (let c = 0; c < cells.length; c++) {
    const outputs = cells.get(c).outputs;
    if (!outputs || typeof outputs.set !== "function") continue;
    for (let i = 0; i < outputs.length; i++) {
      const view = (outputs.get(i).data || {})[WIDGET_VIEW];
      if (view && view.model_id === saved.model_id) {
        outputs.set(i, { output_type: "display_data", metadata: {},
          data: { "text/html": html, "text/plain": text } });
        kept = true;
      }
    }
  }
  return kept;
}

function storeFor(model) {
  let store = STORES.get(model);
  if (!store) {
    store = new RunStore(model);
    STORES.set(model, store);
  }
  return store;
}

// ---------------------------------------------------------------------------------------------
// DOM helpers, and the kernel's drawings made into nodes.

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const SAFE_HREF = /^\s*(https?:\/\/|mailto:)/i;
const SAFE_PICTURE = /^data:image\/(png|jpeg|gif|webp);/i;
const UNSAFE_TAG = /^(script|style|iframe|frame|frameset|object|embed|link|meta|base|form|svg|math|template)$/i;

// The HTML the kernel drew (jupyter/_item_html.py) as a fragment. It is safe as drawn (model
// output goes through Markdown with raw HTML escaped, links only http(s) and mailto); parsed
// into an inert template, it is checked once more here, so that no fault there can run script
// or fetch anything: elements that could are dropped, and so are attributes that could.
function fromHtml(html) {
  const template = document.createElement("template");
  template.innerHTML = html || "";
  for (const node of template.content.querySelectorAll("*")) {
    if (UNSAFE_TAG.test(node.localName)) {
      node.remove();
      continue;
    }
    for (const { name, value } of [...node.attributes]) {
      const unsafe = name.startsWith("on") || name === "srcset" || /action$/.test(name) ||
        (name.endsWith("href") && !(name === "href" && SAFE_HREF.test(value))) ||
        (name === "src" && !SAFE_PICTURE.test(value)) || (name === "style" && /url\(|expression/i.test(value));
      if (unsafe) node.removeAttribute(name);
    }
  }
  return template.content;
}

const keyOf = (node) => node.nodeType === 1 ? node.localName + "." + (node.classList[0] || "") : "#" + node.nodeType;

// Brings `old` to what `fresh` draws, keeping the nodes that match (same tag and first class, in
// order), so what a person changed survives an update: an open <details> (`open` is theirs, or
// the view's, never the drawing's), focus, and whatever the view put in a container it fills
// itself (`data-slot`).
function morph(old, fresh) {
  if (old.nodeType !== 1) {
    if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
    return;
  }
  for (const { name } of [...old.attributes]) {
    if (name !== "open" && !fresh.hasAttribute(name)) old.removeAttribute(name);
  }
  for (const { name, value } of [...fresh.attributes]) {
    if (name !== "open" && old.getAttribute(name) !== value) old.setAttribute(name, value);
  }
  if (old.dataset.slot) return;
  const pool = [...old.childNodes];
  const wanted = [...fresh.childNodes].map((child) => {
    const i = pool.findIndex((node) => keyOf(node) === keyOf(child));
    if (i < 0) return child;
    const [match] = pool.splice(i, 1);
    morph(match, child);
    return match;
  });
  for (const node of pool) node.remove();
  wanted.forEach((node, i) => {
    if (old.childNodes[i] !== node) old.insertBefore(node, old.childNodes[i] || null);
  });
}

// ---------------------------------------------------------------------------------------------
// Formatting helpers.

// The window's fill at the last call (0..1), or null before any: mirrors context_share in
// jupyter/_static_view.py.
function contextShare(s) {
  if (typeof s.context_used !== "number" || typeof s.context_window !== "number" || s.context_window <= 0) return null;
  return Math.min(1, s.context_used / s.context_window);
}

// "context 45% of 200k": mirrors context_label in jupyter/_static_view.py.
function contextLabel(s) {
  const share = contextShare(s);
  if (share === null) return "";
  const w = s.context_window;
  return "context " + Math.round(share * 100) + "% of " + (w >= 1000 ? Math.round(w / 1000) + "k" : String(w));
}

function fmtInt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "0";
}

function fmtSeconds(s) {
  if (typeof s !== "number") return "";
  if (s < 60) return s.toFixed(1) + " s";
  const whole = Math.round(s);
  return Math.floor(whole / 60) + " min " + String(whole % 60).padStart(2, "0") + " s";
}

// The one cost format (static_view.format_cost): "$0.0123", and "—" when unknown.
function fmtCost(c) {
  if (c === null || c === undefined) return "—";
  return "$" + Number(c).toFixed(4);
}

// Characters of text and thinking streamed so far (static_view.streamed_chars).
function streamedChars(items) {
  let n = 0;
  for (const item of items) {
    if (item.kind === "text" || item.kind === "thinking") n += (item.text || "").length;
  }
  return n;
}

// "1,200 in · 80 out"; the call in flight estimated and marked "~" until the provider reports
// it: its context's estimate in, a token per four characters streamed since out
// (static_view.token_figures).
function tokenFigures(s, chars) {
  const pending = s.pending_input || 0;
  const extra = Math.max(0, chars - (s.usage_chars || 0));
  return (pending ? "~" : "") + fmtInt((s.input_tokens || 0) + pending) + " in · " +
    (extra ? "~" : "") + fmtInt((s.output_tokens || 0) + Math.ceil(extra / 4)) + " out";
}

// What the view says once its kernel is gone, and how to go on from there.
const KERNEL_GONE = "the kernel behind this view was restarted or shut down. To go on with this " +
  "session, run %agent resume in a cell (in a Python kernel, run %load_ext agent_kernel first), " +
  "or re-run this cell with %load_ext agent_kernel before it. The journal keeps everything so far.";

const PHASE_LABELS = { idle: "waiting to start", running: "running", finished: "finished",
  cancelled: "cancelled", error: "error", interrupted: "interrupted (the journal ends here)" };
const ACTIVITY_LABELS = { model: "waiting for the model", writing: "writing", thinking: "thinking",
  tool_call: "writing a tool call" };
// Steering labels (static_view.PAUSED_LABEL, PAUSING_LABEL).
const PAUSED_LABEL = "paused — waiting at the turn boundary";
const PAUSING_LABEL = "pausing at the next turn boundary…";
// Longest message to a running agent (view.STEER_CAP); the kernel checks it again.
const STEER_CAP = 4000;

// "expires in 1:05" for an approval with a deadline (epoch seconds); a display only: the kernel
// decides when it has expired.
function expiryLabel(expiresAt) {
  if (typeof expiresAt !== "number") return "";
  const left = Math.ceil(expiresAt - Date.now() / 1000);
  if (left <= 0) return "expiring…";
  return "expires in " + Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0");
}

// What a running run is doing: the tools running, else the model's activity
// (static_view.activity_label).
function activityLabel(s, items, waiting) {
  if (s.phase !== "running" || waiting || s.stopping || s.paused) return "";
  const tools = [];
  for (const item of items) {
    if (item.kind === "tool" && !item.agent && item.status === "running") tools.push(item.name);
  }
  if (tools.length) return "running " + tools.join(", ");
  return ACTIVITY_LABELS[s.activity] || "";
}

// ---------------------------------------------------------------------------------------------
// Approvals a person must not miss: the browser tab's title says so while any is pending, and
// JupyterLab raises a notification when the page exposes its command to do so. The state lives
// on the page, not in this module: each widget may load its own copy of the module.

const TITLE_PREFIX = "⏸ approval needed · ";

function approvals() {
  if (!globalThis.__agentKernelApprovals) {
    globalThis.__agentKernelApprovals = { pending: new Map(), observer: null, notice: null };
  }
  return globalThis.__agentKernelApprovals;
}

function setPending(key, count) {
  const a = approvals();
  const before = a.pending.size;
  if (count > 0) a.pending.set(key, count);
  else a.pending.delete(key);
  if ((before > 0) !== (a.pending.size > 0)) {
    syncTitle();
    syncNotice();
  }
}

function syncTitle() {
  if (typeof document === "undefined") return;
  const a = approvals();
  const want = a.pending.size > 0;
  const title = document.title || "";
  const has = title.startsWith(TITLE_PREFIX);
  if (want && !has) document.title = TITLE_PREFIX + title;
  else if (!want && has) document.title = title.slice(TITLE_PREFIX.length);
  // The page may set its own title meanwhile (JupyterLab does on every tab switch): keep the
  // prefix on it while an approval waits.
  const node = document.querySelector("title");
  if (want && !a.observer && node && typeof MutationObserver !== "undefined") {
    a.observer = new MutationObserver(() => syncTitle());
    a.observer.observe(node, { childList: true, characterData: true, subtree: true });
  } else if (!want && a.observer) {
    a.observer.disconnect();
    a.observer = null;
  }
}

function syncNotice() {
  const a = approvals();
  const commands = globalThis.jupyterapp && globalThis.jupyterapp.commands;
  if (!commands || typeof commands.hasCommand !== "function") return; // not JupyterLab 4
  const dismiss = (id) => {
    if (typeof id === "string" && commands.hasCommand("apputils:dismiss-notification")) {
      Promise.resolve(commands.execute("apputils:dismiss-notification", { id })).catch(() => {});
    }
  };
  try {
    if (a.pending.size > 0 && a.notice === null && commands.hasCommand("apputils:notify")) {
      a.notice = "asking";
      Promise.resolve(commands.execute("apputils:notify", {
        message: "An agent is waiting for your approval: Approve or Reject on its card in the notebook.",
        type: "warning",
        options: { autoClose: false },
      })).then((id) => {
        if (approvals().pending.size === 0) {
          a.notice = null;
          dismiss(id);
        } else {
          a.notice = id;
        }
      }).catch(() => { a.notice = null; });
    } else if (a.pending.size === 0 && a.notice !== null) {
      const id = a.notice;
      a.notice = null;
      dismiss(id);
    }
  } catch (err) {
    a.notice = null; // a front-end whose commands differ: the title still says it
  }
}

// Scrolls a card into view once it is on the page (a view renders before it is attached, and
// may be rebuilt from a snapshot meanwhile: then the new card's own call does it). Being laid out
// is what is awaited, however long a busy page takes: a ResizeObserver hears the card get a size.
function scrollWhenShown(node, stillWanted, done) {
  const shown = () => node.isConnected && node.getClientRects().length > 0;
  const scroll = () => {
    node.scrollIntoView({ block: "nearest" });
    done();
  };
  if (!stillWanted()) return;
  if (shown()) {
    scroll();
    return;
  }
  const observer = new ResizeObserver(() => {
    if (!stillWanted()) observer.disconnect();
    else if (shown()) {
      observer.disconnect();
      scroll();
    }
  });
  observer.observe(node);
}

// ---------------------------------------------------------------------------------------------
// Items. The kernel draws each one (its `html`, the same the lasting transcript is made of);
// an item's view puts that drawing on the page, brings it up to date in place (morph), and adds
// what only a live page has: controls, copy buttons, the text still being written.

// A "Copy" button that puts `text()` on the clipboard and says so.
function copyButton(text, title) {
  const button = h("button", "ak-copy", "Copy");
  button.type = "button";
  button.title = title;
  button.addEventListener("click", async (e) => {
    e.stopPropagation();
    const value = text();
    let copied = false;
    try {
      await navigator.clipboard.writeText(value);
      copied = true;
    } catch (err) { // no clipboard API (an insecure page): the selection way
      const area = h("textarea");
      area.value = value;
      area.style.cssText = "position: fixed; opacity: 0;";
      document.body.appendChild(area);
      area.select();
      try { copied = document.execCommand("copy"); } catch (err2) { copied = false; }
      area.remove();
    }
    button.textContent = copied ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
  return button;
}

// Gives each code block under `node` its own Copy button (once).
function addCodeCopyButtons(node) {
  for (const pre of node.querySelectorAll("pre:not([data-copy])")) {
    pre.dataset.copy = "1";
    const wrap = h("div", "ak-code-wrap");
    pre.replaceWith(wrap);
    wrap.append(pre, copyButton(() => pre.textContent.replace(/\n$/, ""), "Copy this code"));
  }
}

// A text or thinking block: the drawing of its finished part, the pieces drawn since (`draw`
// ops, put at the end of its body), then the text not yet drawn, as plain text.
function blockView(item) {
  let root = null;
  let body = null;
  let tail = null;
  let summary = null;
  let shownHtml = null;
  let shown = 0;
  let current = item;
  return {
    get root() { return root; },
    update(it) {
      current = it;
      if (it.html !== shownHtml) {
        const next = fromHtml(it.html).firstElementChild || h("div");
        if (root) root.replaceWith(next);
        root = next;
        shownHtml = it.html;
        shown = 0;
        body = root.querySelector(".ak-md, .ak-thinking-text") || root;
        summary = root.querySelector(":scope > summary");
        tail = h("span", "ak-tail");
        body.append(tail);
        if (it.kind === "text") root.prepend(copyButton(() => current.text || "", "Copy the answer (Markdown)"));
      }
      const pieces = it.pieces || [];
      for (; shown < pieces.length; shown++) tail.before(fromHtml(pieces[shown]));
      addCodeCopyButtons(body);
      const text = it.text || "";
      tail.textContent = text.slice(it.drawn || 0);
      if (summary) summary.textContent = summary.textContent.replace(/\([\d,]+ /, "(" + fmtInt(text.length) + " ");
    },
  };
}

// A card (tool call, sub-agent, compaction, notice, steered message): its drawing, morphed in
// place on each update; `behaviour` adds what the card does on a live page.
function cardView(item, behaviour) {
  let root = null;
  let shownHtml = null;
  const view = {
    get root() { return root; },
    // A container the view fills itself: a tool card's sub-agents, a sub-agent's items.
    slot: (name) => root.querySelector(":scope > [data-slot='" + name + "']"),
    update(it) {
      if (it.html !== shownHtml) {
        const fresh = fromHtml(it.html).firstElementChild || h("div");
        if (root) morph(root, fresh);
        else root = fresh;
        shownHtml = it.html;
      }
      if (behaviour) behaviour.update(it, view);
    },
  };
  if (behaviour && behaviour.tick) view.tick = () => behaviour.tick(view);
  if (behaviour && behaviour.expand) view.expand = () => behaviour.expand(view);
  if (behaviour && behaviour.item) view.item = behaviour.item;
  return view;
}

// A tool call waiting for a person: the reason box and Approve / Reject / Always allow, put in the
// container the card leaves for them, and its deadline counted down.
function toolBehaviour(store) {
  const controls = h("div", "ak-approval-controls");
  const note = h("div", "ak-approval-note ak-muted");
  note.setAttribute("role", "status");
  const expiry = h("div", "ak-expiry ak-muted");
  expiry.setAttribute("aria-live", "off");
  const reason = h("input", "ak-reason");
  reason.type = "text";
  reason.placeholder = "Reason (optional, sent to the model if you reject)";
  reason.setAttribute("aria-label", "Reason for rejecting");
  const buttons = h("div", "ak-buttons");
  const approve = h("button", "ak-button ak-approve", "Approve");
  approve.title = "Run this call (shortcut: a)";
  const reject = h("button", "ak-button ak-reject", "Reject");
  reject.title = "Refuse this call; the reason, if any, goes to the model (shortcut: r)";
  const always = h("button", "ak-button ak-always", "Always allow");
  always.title = "Approve this call and allow calls like it for the rest of the session";
  for (const b of [approve, reject, always]) b.type = "button";
  buttons.append(approve, reject, always);
  controls.append(note, expiry, reason, buttons);

  let current = null;
  let sentAt = 0;
  const decide = (choice) => {
    sentAt = performance.now();
    for (const b of [approve, reject, always]) b.disabled = true;
    note.textContent = "Sending your decision…";
    const text = reason.value.trim();
    if (store.gone) return;
    store.send({
      type: "approval",
      call_id: current.call_id,
      agent: current.agent || null, // sub-agents may number their calls alike
      decision: choice,
      reason: choice === "reject" && text ? text : null,
    });
    // No answer (kernel busy elsewhere, or gone): let the person try again.
    setTimeout(() => {
      if (!store.gone && current.status === "awaiting_approval" && performance.now() - sentAt >= 4000) {
        for (const b of [approve, reject, always]) b.disabled = false;
        note.textContent = "No answer from the kernel yet. If it was restarted, reload this page: until then " +
          "JupyterLab may deliver clicks to the kernel that is gone. The run keeps waiting; you can also answer " +
          "with %agent approve " + current.call_id + " in another cell.";
      }
    }, 4000);
  };
  approve.addEventListener("click", () => decide("approve"));
  reject.addEventListener("click", () => decide("reject"));
  always.addEventListener("click", () => decide("always_allow"));
  reason.addEventListener("keydown", (e) => {
    if (e.key === "Enter") decide("reject");
    e.stopPropagation(); // keep notebook shortcuts out of the text box
  });

  let wasAwaiting = false;
  let hadDiff = false;
  return {
    // Called every 200 ms by the view: counts an approval's deadline down.
    tick() {
      const counting = !store.gone && current.status === "awaiting_approval" &&
        typeof current.expires_at === "number";
      expiry.hidden = !counting;
      if (counting) expiry.textContent = expiryLabel(current.expires_at);
    },
    update(it, view) {
      current = it;
      const root = view.root;
      const args = root.querySelector(":scope > .ak-args");
      const diff = !!root.querySelector(":scope > .ak-diff-view");
      if (diff && !hadDiff && args) args.open = false; // the diff says it better
      hadDiff = diff;
      const awaiting = it.status === "awaiting_approval";
      const slot = view.slot("approval");
      if (slot && controls.parentNode !== slot) slot.append(controls);
      if (awaiting && !wasAwaiting) {
        if (args) args.open = !diff; // a person should see what they are approving
        for (const b of [approve, reject, always]) b.disabled = false;
        note.textContent = "";
        // Brought into view once (during Run All it may wait below the fold); a person who
        // scrolls away afterwards is left alone, and a view rebuilt later does not scroll again.
        // The whole card, buttons included, which are laid out only once this update ends:
        // scroll on the next frame.
        const key = (it.agent || "") + "\u0000" + it.call_id;
        requestAnimationFrame(() => scrollWhenShown(root,
          () => current.status === "awaiting_approval" && !store.scrolled.has(key),
          () => store.scrolled.add(key)));
      }
      wasAwaiting = awaiting;
      if (awaiting && store.gone) {
        for (const b of [approve, reject, always]) b.disabled = true;
        reason.disabled = true;
        note.textContent = "This call can no longer be answered here: " + KERNEL_GONE;
      }
      this.tick();
    },
  };
}

// A sub-agent's card: open while it runs, closed once it ends, unless the person has opened or
// closed it themselves (remembered in `toggled`, which outlives a rebuild from a snapshot).
function subagentBehaviour(item, toggled) {
  let current = item;
  let touched = toggled.has(item.agent_id);
  let wasRunning = null;
  return {
    item: () => current,
    expand(view) {
      // Opened for a person to answer: from here the view folds it again when it ends.
      touched = false;
      toggled.delete(current.agent_id);
      view.root.open = true;
    },
    update(it, view) {
      current = it;
      const root = view.root;
      if (wasRunning === null) {
        // The choice is kept from the click itself: its `toggle` event comes in a later task,
        // and a snapshot arriving before that task would rebuild the card and lose the click.
        root.querySelector(":scope > summary").addEventListener("click", () => {
          touched = true;
          toggled.set(current.agent_id, !root.open); // the click's default action flips `open` next
        });
        root.addEventListener("toggle", () => {
          if (touched) toggled.set(current.agent_id, root.open);
        });
      }
      const running = it.status === "running";
      if (wasRunning === null) root.open = touched ? toggled.get(it.agent_id) : running;
      else if (wasRunning && !running && !touched) root.open = false;
      wasRunning = running;
    },
  };
}

function itemView(item, store, toggled) {
  if (item.kind === "text" || item.kind === "thinking") return blockView(item);
  if (item.kind === "tool") return cardView(item, toolBehaviour(store));
  if (item.kind === "subagent") return cardView(item, subagentBehaviour(item, toggled));
  return cardView(item, null);
}

// ---------------------------------------------------------------------------------------------
// An MCP server's question (elicitation): a form built from its JSON schema, answered here.

function choicesOf(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.map((v, i) => [v, (prop.enumNames || [])[i] || String(v)]);
  const options = prop.oneOf || prop.anyOf;
  if (Array.isArray(options) && options.every((o) => o && "const" in o)) {
    return options.map((o) => [o.const, o.title || String(o.const)]);
  }
  return null;
}

function elicitationField(name, prop, required) {
  const field = h("label", "ak-elicit-field");
  field.append(h("span", "ak-elicit-label", (prop.title || name) + (required ? " *" : "")));
  const single = choicesOf(prop);
  const multi = prop.type === "array" && prop.items ? choicesOf(prop.items) : null;
  let input;
  if (single || multi) {
    input = document.createElement("select");
    input.multiple = Boolean(multi);
    const chosen = new Set([].concat(prop.default ?? []).map(String));
    if (single && !required && prop.default === undefined) input.append(new Option("", ""));
    for (const [value, label] of single || multi) {
      const option = new Option(label, String(value));
      option.selected = chosen.has(String(value));
      input.append(option);
    }
    input.dataset.kind = multi ? "multi" : "choice";
    input.choices = new Map((single || multi).map(([v]) => [String(v), v])); // the typed values
  } else {
    input = document.createElement("input");
    const kind = ["boolean", "number", "integer"].includes(prop.type) ? prop.type : "string";
    input.type = kind === "boolean" ? "checkbox" : kind === "string" ? "text" : "number";
    if (kind === "boolean") input.checked = prop.default === true;
    else if (prop.default !== undefined) input.value = String(prop.default);
    if (kind === "integer") input.step = "1";
    if (kind === "number") input.step = "any";
    if (prop.minimum !== undefined) input.min = String(prop.minimum);
    if (prop.maximum !== undefined) input.max = String(prop.maximum);
    input.dataset.kind = kind;
  }
  input.name = name;
  input.required = required && input.type !== "checkbox";
  field.append(input);
  if (prop.description) field.append(h("span", "ak-elicit-help", prop.description));
  return [field, input];
}

function elicitationValues(inputs) {
  const content = {};
  for (const input of inputs) {
    const kind = input.dataset.kind;
    if (kind === "boolean") content[input.name] = input.checked;
    else if (kind === "multi") content[input.name] = [...input.selectedOptions].map((o) => input.choices.get(o.value));
    else if (input.value === "") continue; // left empty: the server's default applies
    else if (kind === "choice") content[input.name] = input.choices.get(input.value);
    else if (kind === "integer") content[input.name] = parseInt(input.value, 10);
    else if (kind === "number") content[input.name] = Number(input.value);
    else content[input.name] = input.value;
  }
  return content;
}

function elicitationForm(model, request) {
  const form = h("form", "ak-elicitation");
  form.dataset.id = request.id;
  form.append(h("div", "ak-elicit-title", "The MCP server " + request.server + " asks you:"));
  if (request.message) form.append(h("div", "ak-elicit-message", request.message));
  const schema = request.schema || {};
  const required = new Set(schema.required || []);
  const inputs = [];
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    const [field, input] = elicitationField(name, prop || {}, required.has(name));
    form.append(field);
    inputs.push(input);
  }
  const buttons = h("div", "ak-buttons");
  const send = (action) => {
    if (action === "accept" && !form.reportValidity()) return;
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    storeFor(model).send({ type: "elicitation", id: request.id, action,
      content: action === "accept" ? elicitationValues(inputs) : null });
  };
  for (const [cls, label, action, title] of [
    ["ak-approve ak-elicit-accept", "Accept", "accept", "Send these answers to the server"],
    ["ak-reject ak-elicit-decline", "Decline", "decline", "Tell the server you decline to answer"],
    ["ak-elicit-cancel", "Cancel", "cancel", "Dismiss the question without answering"]]) {
    const b = h("button", "ak-button " + cls, label);
    b.type = "button";
    b.title = title;
    b.addEventListener("click", () => send(action));
    buttons.append(b);
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); send("accept"); });
  form.append(buttons);
  return form;
}

// ---------------------------------------------------------------------------------------------
// The view.

function render({ model, el }) {
  const store = storeFor(model);
  const root = h("div", "ak-view");
  const bar = h("div", "ak-statusbar");
  const phase = h("span", "ak-phase");
  phase.setAttribute("aria-live", "polite");
  const activity = h("span", "ak-stat ak-activity");
  const turn = h("span", "ak-stat");
  const tokens = h("span", "ak-stat");
  const cost = h("span", "ak-stat");
  const elapsed = h("span", "ak-stat");
  const modelName = h("span", "ak-stat ak-muted");
  const meter = h("span", "ak-stat ak-context");
  const meterBar = h("span", "ak-meter");
  const meterFill = h("span", "ak-meter-fill");
  const meterText = h("span", "");
  meterBar.setAttribute("aria-hidden", "true");
  meterBar.append(meterFill);
  meter.append(meterBar, meterText);
  const stop = h("button", "ak-button ak-stop", "Stop");
  stop.type = "button";
  stop.title = "Cancel the run; the journal keeps everything so far (shortcut: Esc or s)";
  bar.append(phase, activity, turn, tokens, cost, elapsed, meter, modelName, h("span", "ak-spacer"), stop);
  const list = h("div", "ak-items");
  const asking = h("div", "ak-asking"); // an MCP server's question, while one waits
  // Steering, while the run goes on: a message for its next turn, Pause and Resume.
  const steer = h("div", "ak-steer");
  const steerInput = h("textarea", "ak-steer-input");
  steerInput.rows = 1;
  steerInput.maxLength = STEER_CAP;
  steerInput.placeholder = "Message for the agent's next turn (Enter sends)";
  steerInput.setAttribute("aria-label", "Message to the running agent");
  const send = h("button", "ak-button ak-steer-send", "Send");
  send.title = "Queue this message for the agent's next turn (agent.steer)";
  const pause = h("button", "ak-button ak-pause", "Pause");
  pause.title = "Hold the run at the next turn boundary (agent.pause)";
  const resume = h("button", "ak-button ak-resume", "Resume");
  resume.title = "Let the paused run go on (agent.resume_run)";
  for (const b of [send, pause, resume]) b.type = "button";
  const queued = h("span", "ak-steer-queued ak-muted");
  steer.append(steerInput, send, pause, resume, queued);
  // Said at once when the kernel goes while the run is live; the controls go with it.
  const gone = h("div", "ak-item ak-notice ak-level-error ak-kernel-gone", "The " + KERNEL_GONE.slice(4));
  gone.setAttribute("role", "alert");
  gone.hidden = true;
  root.append(list, asking, gone, steer, bar);
  el.appendChild(root);
  // Shortcuts while the view (or a card in it) has focus: a approves and r rejects the card with
  // focus, or the only one waiting; Escape or s stops the run. Typing in a text box is left alone,
  // and a key the view acts on goes no further. The listener is on the window in the capture phase:
  // Notebook 7 reads shortcuts while the key travels down to the focused element (JupyterLab on its
  // way back up), so a listener on the view itself would come after its command mode (a inserts a
  // cell above).
  root.tabIndex = 0;
  const onKey = (e) => {
    if (!root.contains(e.target)) return;
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    if (e.target.closest && e.target.closest("input, textarea, select, [contenteditable]")) return;
    const shown = (b) => b && !b.disabled && b.getClientRects().length > 0;
    let button = null;
    if (e.key === "a" || e.key === "r") {
      const waiting = [...root.querySelectorAll(".ak-tool[data-status='awaiting_approval']")];
      const focused = e.target.closest && e.target.closest(".ak-tool[data-status='awaiting_approval']");
      const card = focused || (waiting.length === 1 ? waiting[0] : null);
      button = card && card.querySelector(e.key === "a" ? ".ak-approve" : ".ak-reject");
    } else if (e.key === "Escape" || e.key === "s") {
      button = stop;
    }
    if (!shown(button)) return;
    e.preventDefault();
    e.stopPropagation();
    button.click();
  };
  window.addEventListener("keydown", onKey, true);
  const drawQuestion = () => {
    const request = model.get("elicitation") || {};
    if (asking.firstChild && asking.firstChild.dataset.id === request.id) return;
    asking.replaceChildren(...(request.id ? [elicitationForm(model, request)] : []));
  };
  model.on("change:elicitation", drawQuestion);
  drawQuestion();

  let views = new Map(); // item id -> its view
  let agents = new Map(); // sub-agent id -> the view of its card
  let calls = new Map(); // agent and call id -> the view of its tool card
  const toggled = new Map(); // sub-agent id -> open, once the person has toggled its card
  const callKey = (agent, callId) => (agent || "") + "\u0000" + callId;
  let stopSent = false;
  stop.addEventListener("click", () => {
    stopSent = true;
    drawStatus();
    store.send({ type: "stop" });
  });
  const sendSteer = () => {
    const text = steerInput.value.trim();
    if (!text || store.status.phase !== "running") return;
    store.send({ type: "steer", text });
    steerInput.value = "";
  };
  send.addEventListener("click", sendSteer);
  steerInput.addEventListener("keydown", (e) => {
    e.stopPropagation(); // keep notebook shortcuts out of the text box
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      sendSteer();
    }
  });
  let pauseSent = false;
  pause.addEventListener("click", () => {
    pauseSent = true;
    drawStatus();
    store.send({ type: "pause" });
  });
  resume.addEventListener("click", () => {
    resume.disabled = true;
    store.send({ type: "resume_run" });
  });

  // Where an item goes: a sub-agent's card under the call that started it; any other item of a
  // sub-agent inside that sub-agent's card; the rest in the run's own list.
  const containerFor = (item) => {
    if (item.kind === "subagent" && item.parent_call_id) {
      const call = calls.get(callKey(item.agent, item.parent_call_id));
      if (call && call.slot("children")) return call.slot("children");
    }
    const owner = item.agent ? agents.get(item.agent) : null;
    return (owner && owner.slot("items")) || list;
  };

  // Opens the cards around a sub-agent's call that waits for a person.
  const reveal = (agent) => {
    for (let depth = 0; agent && depth < 64; depth++) {
      const owner = agents.get(agent);
      if (!owner) return;
      owner.expand();
      agent = owner.item().agent;
    }
  };

  const addItem = (id) => {
    const item = store.items.get(id);
    if (!item || !item.html) return; // a kind this page's kernel does not draw
    const view = itemView(item, store, toggled);
    view.update(item);
    let node = view.root;
    if (item.agent && !agents.has(item.agent)) {
      node = h("div", "ak-subagent"); // its card is unknown: label it where it stands
      node.dataset.agent = item.agent;
      node.append(view.root);
    }
    views.set(id, view);
    if (item.kind === "tool") calls.set(callKey(item.agent, item.call_id), view);
    if (item.kind === "subagent") agents.set(item.agent_id, view);
    containerFor(item).appendChild(node);
    if (item.status === "awaiting_approval") reveal(item.agent);
  };

  const drawStatus = () => {
    const s = store.status;
    const running = s.phase === "running";
    const waiting = store.awaiting() > 0;
    let label = PHASE_LABELS[s.phase] || s.phase || "waiting to start";
    if (waiting) label = "waiting for your approval";
    if (running && s.pausing) label = PAUSING_LABEL;
    if (running && s.paused) label = PAUSED_LABEL;
    if (running && s.stopping) label = "stopping…";
    if (s.phase === "finished" && s.reason && s.reason !== "end_turn") label += " (" + s.reason + ")";
    // Gone before the run's end was drawn (the kernel may have marked it interrupted as it went).
    const orphaned = store.gone && !(model.get("saved") || {}).final && s.phase !== "finished";
    if (orphaned) label = "kernel gone: this run stopped with it";
    phase.textContent = label;
    gone.hidden = !orphaned;
    root.dataset.kernel = store.gone ? "gone" : "live";
    const held = running && s.paused;
    phase.className = "ak-phase ak-phase-" + (waiting ? "waiting" : held ? "paused" : s.phase || "idle");
    activity.textContent = activityLabel(s, store.items.values(), waiting);
    root.dataset.phase = s.phase || "idle";
    if (s.turn && s.max_turns) {
      turn.textContent = s.turn > s.max_turns ? "final answer (limit " + s.max_turns + " turns)"
        : "turn " + s.turn + " of " + s.max_turns;
    } else {
      turn.textContent = s.turn ? "turn " + s.turn : "";
    }
    tokens.textContent = tokenFigures(s, streamedChars(store.items.values()));
    cost.textContent = fmtCost(s.cost_usd) + (typeof s.max_cost === "number" ? " of $" + s.max_cost.toFixed(2) + " budget" : "");
    const share = contextShare(s);
    meter.hidden = share === null;
    if (share !== null) {
      meterFill.style.width = Math.round(share * 100) + "%";
      meter.dataset.warn = s.context_warned || share >= 0.8 ? "true" : "false";
      meterText.textContent = contextLabel(s);
      meter.title = fmtInt(s.context_used) + " of " + fmtInt(s.context_window) + " tokens of the model's context window at the last call";
    }
    elapsed.textContent = fmtSeconds(store.elapsed());
    modelName.textContent = s.model || "";
    const stopping = running && (s.stopping || stopSent);
    stop.hidden = !running || store.gone;
    stop.disabled = stopping;
    stop.textContent = stopping ? "Stopping…" : "Stop";
    // Steering controls exist only while the run does: an ended run has nothing to steer.
    steer.hidden = !running || store.gone;
    root.dataset.paused = held ? "true" : "false";
    steerInput.disabled = send.disabled = stopping;
    pause.disabled = stopping || held || !!s.pausing || pauseSent;
    pause.textContent = s.pausing || (pauseSent && !held) ? "Pausing…" : "Pause";
    resume.disabled = stopping || !held;
    const n = s.queued || 0;
    queued.textContent = n ? n + " message" + (n === 1 ? "" : "s") + " waiting for the next turn boundary" : "";
  };

  const rebuild = () => {
    views = new Map();
    agents = new Map();
    calls = new Map();
    list.replaceChildren();
    for (const id of store.order) addItem(id);
    drawStatus();
  };

  const unsubscribe = store.subscribe((change) => {
    if (change.reset) {
      rebuild();
      return;
    }
    for (const id of change.changed) {
      const view = views.get(id);
      const item = store.items.get(id);
      if (view) view.update(item);
      if (item.status === "awaiting_approval") reveal(item.agent);
    }
    if (change.status) stopSent = pauseSent = false; // the kernel has answered: its status says it all
    if (change.gone) {
      for (const [id, view] of views) if (store.items.has(id)) view.update(store.items.get(id));
      for (const b of asking.querySelectorAll("button, input, select, textarea")) b.disabled = true;
    }
    for (const id of change.added) {
      const view = views.get(id);
      if (view) view.update(store.items.get(id));
      else addItem(id);
    }
    drawStatus();
  });

  const ticker = setInterval(() => {
    if (store.status.phase !== "running" || store.gone) return;
    elapsed.textContent = fmtSeconds(store.elapsed());
    for (const view of views.values()) if (view.tick) view.tick();
  }, 200);

  rebuild();
  store.views++;
  store.trackApprovals();
  store.requestSync();
  return () => {
    clearInterval(ticker);
    window.removeEventListener("keydown", onKey, true);
    model.off("change:elicitation", drawQuestion);
    unsubscribe();
    store.views--;
    store.trackApprovals(); // no view left on the page: nothing here can be answered
  };
}

function initialize({ model }) {
  storeFor(model); // listen from the model's creation, before any view renders
}

export default { initialize, render };
