/* The dashboard's Sources panel: the folders the backend keeps indexed (GET /sources, every second while
   something is indexing, every 3 s otherwise), added and removed from the page with same-origin fetch().
   After each render the panel carries data-ready="1", data-rows, data-summary, data-paused, and every row
   data-path / data-state / data-files / data-genes (tests read them). */
(function () {
  "use strict";

  const panel = document.getElementById("sources");
  if (!panel) return;
  const $ = (id) => document.getElementById(id);
  const body = panel.querySelector("#sources-table tbody");
  const summary = $("sources-summary");
  const pauseBtn = $("sources-pause");
  const message = $("sources-message");
  let timer = null;
  let paused = false;

  function text(tag, value, cls) {
    const el = document.createElement(tag);
    if (cls) el.className = cls;
    el.textContent = value == null ? "" : String(value);
    return el;
  }
  const num = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "–");
  function ago(t) {
    if (!t) return "never";
    const s = Math.max(0, Date.now() / 1000 - t);
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 172800) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }
  function say(msg, isError) {
    message.textContent = msg;
    message.className = isError ? "muted err" : "muted";
  }

  async function call(method, url, payload) {
    const init = { method: method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (payload !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    const response = await fetch(url, init);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const why = data && data.error && data.error.message ? data.error.message : "HTTP " + response.status;
      throw new Error(why);
    }
    return data;
  }

  function row(src) {
    const tr = document.createElement("tr");
    tr.dataset.path = src.path;
    tr.dataset.state = src.state;
    tr.dataset.files = src.files;
    tr.dataset.genes = src.genes;
    tr.dataset.project = src.project || "";
    const path = text("td", src.path, "path");
    path.title = src.path + (src.project ? "  [" + src.project + "]" : "");
    if (src.project) path.appendChild(text("span", " [" + src.project + "]", "project"));
    tr.appendChild(path);
    const state = document.createElement("td");
    state.appendChild(text("span", src.state.replace(/_/g, " "), "state " + src.state));  // other_branch → other branch
    if (src.progress && src.progress.total) {
      const bar = document.createElement("span");
      bar.className = "progress";
      bar.title = num(src.progress.done) + " / " + num(src.progress.total) + " files";
      const fill = document.createElement("span");
      fill.style.width = Math.min(100, (100 * src.progress.done) / src.progress.total).toFixed(1) + "%";
      bar.appendChild(fill);
      state.appendChild(bar);
      state.appendChild(text("span", " " + num(src.progress.done) + " / " + num(src.progress.total), "muted"));
    }
    tr.appendChild(state);
    tr.appendChild(text("td", num(src.files), "num"));
    tr.appendChild(text("td", num(src.genes), "num"));
    tr.appendChild(text("td", ago(src.last_indexed)));
    const skipped = text("td", num(src.skipped_total || 0), "num skipped");
    skipped.title = (src.skipped || []).map((s) => s.path + ": " + s.reason).join("\n") || "none";
    tr.appendChild(skipped);
    tr.appendChild(text("td", src.last_error || "", "errors"));
    const actions = document.createElement("td");
    actions.className = "actions";
    const stop = text("button", "Stop watching", "btn");
    stop.type = "button";
    stop.title = "Stop watching this folder; its indexed chunks stay";
    stop.dataset.action = "remove";
    stop.addEventListener("click", () => remove(src.path, false, stop));
    const forget = text("button", "Remove + forget", "btn danger");
    forget.type = "button";
    forget.title = "Stop watching and drop this folder's indexed chunks from answers";
    forget.dataset.action = "forget";
    forget.addEventListener("click", () => remove(src.path, true, forget));
    actions.appendChild(stop);
    actions.appendChild(forget);
    tr.appendChild(actions);
    return tr;
  }

  function render(status) {
    const rows = status.sources || [];
    body.replaceChildren(...rows.map(row));
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = text("td", "No folders yet: add one above (or `helix sources add PATH`, or the tray's Add folder…).", "muted");
      td.colSpan = 8;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    summary.textContent = status.summary || "";
    paused = !!status.paused;
    pauseBtn.hidden = false;
    pauseBtn.textContent = paused ? "Resume indexing" : "Pause indexing";
    panel.dataset.ready = "1";
    panel.dataset.rows = String(rows.length);
    panel.dataset.summary = status.summary || "";
    panel.dataset.paused = paused ? "1" : "0";
    panel.dataset.polls = String(Number(panel.dataset.polls || 0) + 1);
  }

  async function refresh() {
    clearTimeout(timer);
    let wait = 3000;
    try {
      const status = await call("GET", "/sources");
      render(status);
      if (status.indexing) wait = 1000; // live progress
    } catch (e) {
      summary.textContent = "sources unavailable: " + e.message;
      panel.dataset.error = e.message;
    }
    timer = setTimeout(refresh, wait);
  }

  async function remove(path, forget, button) {
    button.disabled = true;
    try {
      const result = await call("DELETE", "/sources", { path: path, forget: forget });
      say("Removed " + result.path + ": " + result.detail, false);
    } catch (e) {
      say(e.message, true);
      button.disabled = false;
    }
    refresh();
  }

  $("sources-add").addEventListener("submit", async (event) => {
    event.preventDefault();
    const path = $("sources-path").value.trim();
    const project = $("sources-project").value.trim();
    if (!path) return;
    try {
      const added = await call("POST", "/sources", { path: path, project: project || null });
      say("Added " + added.path + ": indexing now", false);
      $("sources-path").value = "";
      panel.dataset.added = added.path;
    } catch (e) {
      say(e.message, true);
      panel.dataset.addError = e.message;
    }
    refresh();
  });

  pauseBtn.addEventListener("click", async () => {
    pauseBtn.disabled = true;
    try {
      render(await call("POST", paused ? "/sources/resume" : "/sources/pause"));
    } catch (e) {
      say(e.message, true);
    }
    pauseBtn.disabled = false;
  });

  if (location.hash === "#sources") panel.scrollIntoView();
  refresh();
})();
