/* Helix Context dashboard: polls /dashboard/data and draws small SVG charts.
   No dependencies, no network beyond this server. Every chart element gets
   data-drawn / data-points / data-series / data-last after it is drawn, and
   <body data-ready="1" data-polls="N"> once data has arrived (tests read them). */
(function () {
  "use strict";

  const POLL_MS = 2000;
  const WINDOW_S = 600; // charts show the last 10 minutes
  const SVGNS = "http://www.w3.org/2000/svg";
  const state = { history: [], last: null, lastT: null, polls: 0, failures: 0, timer: null };

  // ── formatting ──────────────────────────────────────────────────────────
  const isNum = (v) => typeof v === "number" && isFinite(v);
  function fmtNum(v, digits) {
    if (!isNum(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1).replace(/\.0$/, "") + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (a >= 1e5) return Math.round(v / 1e3) + "k";
    if (a >= 1e4) return (v / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
    if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return v.toFixed(digits === undefined ? (a < 10 ? 2 : 1) : digits).replace(/\.?0+$/, "") || "0";
  }
  function fmtSec(s) {
    if (!isNum(s)) return "–";
    if (s === 0) return "0";
    if (s < 0.001) return (s * 1e6).toFixed(0) + " µs";
    const trim = (x) => x.replace(/\.0+$/, "").replace(/(\.\d*?)0+$/, "$1");
    if (s < 1) return trim((s * 1000).toFixed(s < 0.01 ? 2 : s < 0.1 ? 1 : 0)) + " ms";
    return trim(s.toFixed(s < 10 ? 2 : 1)) + " s";
  }
  function fmtBytes(b) {
    if (!isNum(b)) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? String(Math.round(b)) : b.toFixed(b < 10 ? 2 : b < 100 ? 1 : 0)) + " " + u[i];
  }
  const fmtPct = (r) => (isNum(r) ? (r * 100).toFixed(r >= 0.995 || r === 0 ? 0 : 1) + "%" : "–");
  const pad2 = (n) => String(n).padStart(2, "0");
  function fmtClock(t) {
    const d = new Date(t * 1000);
    return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
  }
  function fmtAgo(t) {
    const s = Math.max(0, Date.now() / 1000 - t);
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }
  const get = (o, path, dflt) => {
    let cur = o;
    for (const k of path.split(".")) {
      if (cur == null || typeof cur !== "object" || !(k in cur)) return dflt;
      cur = cur[k];
    }
    return cur == null ? dflt : cur;
  };

  // ── DOM helpers ─────────────────────────────────────────────────────────
  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, text) {
    const n = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
    for (const k in attrs || {}) if (attrs[k] !== undefined && attrs[k] !== null) n.setAttribute(k, attrs[k]);
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); }
  function markDrawn(node, points, series, last) {
    node.dataset.drawn = "1";
    node.dataset.points = String(points);
    node.dataset.series = series.join(",");
    node.dataset.last = JSON.stringify(last);
  }
  function legend(id, items) {
    const box = $(id);
    if (!box) return;
    clear(box);
    for (const it of items) {
      const span = el("span", { class: "item" });
      span.appendChild(el("span", { class: "sw" + (it.box ? " box" : ""), style: "background:" + it.color + (it.dash ? ";opacity:.6" : "") }));
      span.appendChild(document.createTextNode(it.name + " "));
      if (it.value !== undefined) span.appendChild(el("b", {}, it.value));
      box.appendChild(span);
    }
  }

  // ── scales ──────────────────────────────────────────────────────────────
  function niceStep(range, count) {
    const raw = range / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  }
  function yScale(maxV, ticks, kind) {
    if (!(maxV > 0)) maxV = 1;
    let step;
    if (kind === "bytes") {
      const raw = maxV / ticks;
      // whole bytes at least: a scale of a few bytes must not print "1 B, 1 B, 0 B"
      const p = Math.max(1, Math.pow(1024, Math.floor(Math.log(raw) / Math.log(1024))));
      step = Math.max(1, niceStep(maxV / p, ticks) * p);
    } else step = niceStep(maxV, ticks);
    if (kind === "int") step = Math.max(1, Math.round(step));
    const top = Math.ceil(maxV / step - 1e-9) * step;
    const vals = [];
    for (let v = 0; v <= top + step / 2; v += step) vals.push(v);
    return { top: top, ticks: vals };
  }
  function timeTicks(t0, t1, width) {
    const span = Math.max(1, t1 - t0);
    const count = Math.max(2, Math.floor(width / 90));
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
    let step = steps[steps.length - 1];
    for (const s of steps) if (span / s <= count) { step = s; break; }
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return out;
  }

  // ── charts ──────────────────────────────────────────────────────────────
  const M = { l: 58, r: 8, t: 6, b: 18 };  // l: room for "1023.9 MiB" on the y axis

  function frame(node) {
    clear(node);
    const w = Math.max(120, node.clientWidth || 300);
    const h = Math.max(50, node.clientHeight || 150);
    const svg = el("svg:svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img" });
    node.appendChild(svg);
    return { svg: svg, w: w, h: h, iw: w - M.l - M.r, ih: h - M.t - M.b };
  }
  function emptyState(node, msg, series) {
    clear(node);
    node.appendChild(el("div", { class: "empty" }, msg));
    markDrawn(node, 0, series || [], null);
  }
  function axes(f, t0, t1, ys, fmtY, small) {
    const g = el("svg:g", {});
    const yTicks = small ? [ys.ticks[0], ys.ticks[ys.ticks.length - 1]] : ys.ticks;
    for (const v of yTicks) {
      const y = M.t + f.ih - (v / ys.top) * f.ih;
      g.appendChild(el("svg:line", { class: v === 0 ? "baseline" : "gridline", x1: M.l, x2: M.l + f.iw, y1: y, y2: y }));
      g.appendChild(el("svg:text", { x: M.l - 6, y: y + 3.5, "text-anchor": "end" }, fmtY(v)));
    }
    if (!small) {
      for (const t of timeTicks(t0, t1, f.iw)) {
        const x = M.l + ((t - t0) / Math.max(1e-9, t1 - t0)) * f.iw;
        g.appendChild(el("svg:text", { x: x, y: f.h - 4, "text-anchor": "middle" }, fmtClock(t).slice(0, t1 - t0 > 300 ? 5 : 8)));
      }
    }
    f.svg.appendChild(g);
  }
  function timeDomain(points) {
    const t1 = points.length ? points[points.length - 1].t : Date.now() / 1000;
    let t0 = points.length ? points[0].t : t1 - 60;
    // at least ~12 sampling intervals wide, so a fresh page does not draw one fat bar
    const dts = points.map((p) => p.dt).filter(isNum).sort((a, b) => a - b);
    const interval = dts.length ? dts[Math.floor(dts.length / 2)] : 2;
    if (t1 - t0 < 12 * interval) t0 = t1 - 12 * interval;
    return [t0, t1];
  }

  /* series: [{name, color, values: [v|null per point], dash, area, width, step}] */
  function lineChart(id, points, series, opts) {
    const node = $(id);
    if (!node) return;
    opts = opts || {};
    const fmtY = opts.fmt || fmtNum;
    const names = series.map((s) => s.name);
    let count = 0, maxV = 0;
    for (const s of series) for (const v of s.values) if (isNum(v)) { count++; if (v > maxV) maxV = v; }
    if (opts.max && opts.max > maxV) maxV = opts.max;
    if (!count) { emptyState(node, opts.empty || "No data yet", names); return; }
    const f = frame(node);
    const [t0, t1] = timeDomain(points);
    const ys = yScale(maxV * 1.05, opts.small ? 1 : 3, opts.kind);
    axes(f, t0, t1, ys, fmtY, opts.small);
    const X = (t) => M.l + ((t - t0) / Math.max(1e-9, t1 - t0)) * f.iw;
    const Y = (v) => M.t + f.ih - (Math.min(v, ys.top) / ys.top) * f.ih;
    for (const s of series) {
      // intervals without data are skipped (the line joins its neighbours); sparse series get dots
      const idx = [];
      s.values.forEach((v, i) => { if (isNum(v)) idx.push(i); });
      if (!idx.length) continue;
      let d = "";
      idx.forEach((i, k) => {
        const x = X(points[i].t).toFixed(1), y = Y(s.values[i]).toFixed(1);
        if (k === 0) d += "M" + x + "," + y;
        else if (s.step) d += "H" + x + "V" + y;
        else d += "L" + x + "," + y;
      });
      if (s.area) {
        const a = idx[0], b = idx[idx.length - 1];
        const ad = "M" + X(points[a].t).toFixed(1) + "," + Y(0).toFixed(1) + "L" + d.slice(1) +
          "L" + X(points[b].t).toFixed(1) + "," + Y(0).toFixed(1) + "Z";
        f.svg.appendChild(el("svg:path", { d: ad, style: "fill:" + s.color + ";opacity:.14;stroke:none" }));
      }
      f.svg.appendChild(el("svg:path", {
        d: d, "data-series": s.name,
        style: "fill:none;stroke:" + s.color + ";stroke-width:" + (s.width || 1.8) + ";stroke-linejoin:round;stroke-linecap:round" + (s.dash ? ";stroke-dasharray:5 4" : ""),
      }));
      const sparse = idx.length < 2 || idx.length < 0.5 * points.length;
      if (sparse && idx.length <= 60 && !s.step) {
        for (const i of idx) f.svg.appendChild(el("svg:circle", { cx: X(points[i].t).toFixed(1), cy: Y(s.values[i]).toFixed(1), r: 2.4, style: "fill:" + s.color }));
      }
    }
    hover(f, points, series, X, fmtY, t0, t1);
    const last = {};
    for (const s of series) { const vs = s.values.filter(isNum); last[s.name] = vs.length ? vs[vs.length - 1] : null; }
    markDrawn(node, count, names, last);
  }

  /* stacks: [{name, color, values: [v|null per point]}] drawn as stacked bars per point */
  function barChart(id, points, stacks, opts) {
    const node = $(id);
    if (!node) return;
    opts = opts || {};
    const fmtY = opts.fmt || fmtNum;
    const names = stacks.map((s) => s.name);
    let count = 0, maxV = 0;
    points.forEach((p, i) => {
      let sum = 0, any = false;
      for (const s of stacks) if (isNum(s.values[i])) { sum += s.values[i]; any = true; }
      if (any) { count++; if (sum > maxV) maxV = sum; }
    });
    if (!count) { emptyState(node, opts.empty || "No data yet", names); return; }
    const f = frame(node);
    const [t0, t1] = timeDomain(points);
    const ys = yScale(maxV * 1.05, 3, opts.kind);
    axes(f, t0, t1, ys, fmtY);
    const X = (t) => M.l + ((t - t0) / Math.max(1e-9, t1 - t0)) * f.iw;
    const Y = (v) => M.t + f.ih - (Math.min(v, ys.top) / ys.top) * f.ih;
    const slot = f.iw / Math.max(8, (t1 - t0) / (opts.interval || 2));
    const bw = Math.max(1.5, Math.min(14, slot * 0.72));
    points.forEach((p, i) => {
      let base = 0;
      for (const s of stacks) {
        const v = s.values[i];
        if (!isNum(v) || v <= 0) continue;
        const y0 = Y(base), y1 = Y(base + v);
        f.svg.appendChild(el("svg:rect", {
          x: (X(p.t) - bw / 2).toFixed(1), y: y1.toFixed(1), width: bw.toFixed(1), height: Math.max(0.8, y0 - y1).toFixed(1),
          rx: Math.min(2, bw / 4), style: "fill:" + s.color, "data-series": s.name,
        }));
        base += v;
      }
    });
    hover(f, points, stacks, X, fmtY, t0, t1);
    const last = {};
    for (const s of stacks) { const vs = s.values.filter(isNum); last[s.name] = vs.length ? vs[vs.length - 1] : null; }
    markDrawn(node, count, names, last);
  }

  function hover(f, points, series, X, fmtY, t0, t1) {
    const tip = $("tooltip");
    const cursor = el("svg:line", { class: "cursor", y1: M.t, y2: M.t + f.ih, x1: -10, x2: -10, visibility: "hidden" });
    const overlay = el("svg:rect", { x: M.l, y: M.t, width: f.iw, height: f.ih, style: "fill:transparent" });
    f.svg.appendChild(cursor);
    f.svg.appendChild(overlay);
    overlay.addEventListener("mousemove", (ev) => {
      const box = f.svg.getBoundingClientRect();
      const t = t0 + ((ev.clientX - box.left) * (f.w / box.width) - M.l) / f.iw * (t1 - t0);
      let best = -1, dist = Infinity;
      points.forEach((p, i) => { const d = Math.abs(p.t - t); if (d < dist) { dist = d; best = i; } });
      if (best < 0) return;
      const x = X(points[best].t);
      cursor.setAttribute("x1", x); cursor.setAttribute("x2", x); cursor.setAttribute("visibility", "visible");
      clear(tip);
      tip.appendChild(el("div", { class: "tt-time" }, fmtClock(points[best].t)));
      for (const s of series) {
        const row = el("div", { class: "tt-row" });
        const name = el("span", {});
        name.appendChild(el("span", { class: "sw box", style: "display:inline-block;width:8px;height:8px;border-radius:2px;background:" + s.color }));
        name.appendChild(document.createTextNode(s.name));
        row.appendChild(name);
        row.appendChild(el("b", {}, fmtY(s.values[best])));
        tip.appendChild(row);
      }
      tip.hidden = false;
      const left = Math.min(window.innerWidth - 190, ev.clientX + 14);
      tip.style.left = left + "px";
      tip.style.top = (ev.clientY + 12) + "px";
    });
    overlay.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); tip.hidden = true; });
  }

  /* items: [{label, value, color, note}] — horizontal bars in HTML */
  function hbars(id, items, opts) {
    const node = $(id);
    if (!node) return;
    opts = opts || {};
    clear(node);
    const names = items.map((it) => it.label);
    if (!items.length) {
      node.appendChild(el("div", { class: "empty" }, opts.empty || "No data yet"));
      markDrawn(node, 0, [], null);
      return;
    }
    const max = Math.max(opts.max || 0, ...items.map((it) => it.value || 0)) || 1;
    const last = {};
    for (const it of items) {
      const row = el("div", { class: "hbar", title: it.title || "" });
      row.appendChild(el("span", { class: "lbl" }, it.label));
      const track = el("div", { class: "track" });
      track.appendChild(el("div", { class: "fill", style: "width:" + Math.max(it.value > 0 ? 1.5 : 0, (100 * (it.value || 0)) / max).toFixed(2) + "%;background:" + it.color }));
      row.appendChild(track);
      row.appendChild(el("span", { class: "val" }, it.note !== undefined ? it.note : (opts.fmt || fmtNum)(it.value)));
      node.appendChild(row);
      last[it.label] = it.value;
    }
    markDrawn(node, items.length, names, last);
  }

  // ── rendering the dashboard ─────────────────────────────────────────────
  const C = {
    c1: "var(--c1)", c2: "var(--c2)", c3: "var(--c3)", c4: "var(--c4)", c5: "var(--c5)", c6: "var(--c6)",
    ok: "var(--ok)", warn: "var(--warn)", err: "var(--err)", axis: "var(--axis)",
  };
  const PALETTE = [C.c1, C.c2, C.c3, C.c4, C.c5, C.c6];
  const VERDICT_COLORS = { verified: C.ok, stale_risk: C.warn, needs_refresh: C.err, no_context: C.axis };
  const TIER_ORDER = ["tight", "focused", "broad"];
  const TIER_COLORS = { tight: C.c3, focused: C.c1, broad: C.c2, open: C.c3, aging: C.c4, archived: C.axis };

  function setTile(id, value, sub, unit) {
    const t = $(id);
    if (!t) return;
    const v = t.querySelector(".t-value");
    clear(v);
    v.appendChild(document.createTextNode(value));
    if (unit) v.appendChild(el("small", {}, unit));
    t.querySelector(".t-sub").textContent = sub;
  }
  function pill(id, text, cls) {
    const p = $(id);
    p.textContent = text;
    p.className = "pill " + (cls || "");
  }
  const series = (pts, fn) => pts.map((p) => { const v = fn(p); return isNum(v) ? v : null; });
  const sumObj = (o) => Object.values(o || {}).reduce((a, b) => a + (isNum(b) ? b : 0), 0);

  function render(data) {
    const pts = state.history;
    const s = data.summary || {};
    const sv = data.supervisor_view;
    const last = pts.length ? pts[pts.length - 1] : {};
    const lastHttp = [...pts].reverse().find((p) => p.http) || {};
    const lastOf = (fn) => { for (let i = pts.length - 1; i >= 0; i--) { const v = fn(pts[i]); if (isNum(v)) return v; } return null; };

    // header
    if (sv) {
      const up = sv.backend_up;
      pill("pill-backend", "backend " + sv.backend_status + (sv.pid ? " · pid " + sv.pid : ""), up ? "ok" : "err");
    } else {
      pill("pill-backend", "backend serving · no supervisor", "ok");
    }
    const exp = data.export || {};
    pill("pill-export", exp.enabled ? "OTLP → " + (exp.endpoint || "") : "OTLP export off", exp.enabled ? "ok" : "");
    const g = $("grafana-link");
    if (data.grafana_url) { g.href = data.grafana_url; g.hidden = false; } else g.hidden = true;
    const banner = $("banner");
    if (!data.telemetry) {
      banner.hidden = false;
      banner.className = "banner";
      banner.textContent = "Telemetry is not wired into this backend (app.state.telemetry is empty): only the supervisor's numbers are shown.";
    } else banner.hidden = true;

    // tiles
    const http = s.http || {};
    setTile("tile-requests", fmtNum(http.count || 0), (isNum(lastHttp.http && lastHttp.http.rps) ? fmtNum(lastHttp.http.rps) + " req/s now" : "–") + " · " + fmtNum(http.errors || 0) + " errors");
    setTile("tile-latency", fmtSec(http.p95), "p50 " + fmtSec(http.p50) + " · p99 " + fmtSec(http.p99));
    const chat = s.chat || {};
    setTile("tile-tokens", fmtNum(chat.tokens_in || 0) + " / " + fmtNum(chat.tokens_out || 0), fmtNum(chat.count || 0) + " chats · p95 " + fmtSec(chat.p95));
    const ret = s.retrieval || {};
    setTile("tile-retrievals", fmtNum(ret.count || 0), "avg " + fmtNum(ret.genes_delivered_avg) + " chunks per answer");
    const genome = s.genome || {};
    const indexed = data.indexed || {};
    // the one count (live chunks) that /stats, /sources and the tray show; the tier gauge only when it is missing
    const genes = isNum(indexed.genes) ? indexed.genes : sumObj(genome.genes_by_tier);
    // after [embedding] model changed: how far the background re-embed is (until done, chunks it has not reached
    // answer with less of their meaning)
    const job = indexed.reembed;
    const reembed = job && isNum(job.done) && isNum(job.total)
      ? "re-embedding for the new model: " + fmtNum(job.done) + " of " + fmtNum(job.total) + (isNum(job.percent) ? " (" + Math.round(job.percent) + " %)" : "") + " · "
      : "";
    $("tile-genome").dataset.reembed = job ? job.done + "/" + job.total : "";
    setTile("tile-genome", fmtNum(genes), (indexed.disk_full ? "DISK FULL: reads only · " : "") + reembed + fmtBytes(genome.db_bytes) + " on disk" + (isNum(genome.wal_bytes) ? " · " + fmtBytes(genome.wal_bytes) + " log" : ""));
    const gpu = sv && sv.gpu;
    const meter = document.querySelector("#tile-gpu .meter");
    if (gpu && gpu.available && isNum(gpu.total_bytes) && gpu.total_bytes > 0) {
      const r = (gpu.used_bytes || 0) / gpu.total_bytes;
      setTile("tile-gpu", fmtBytes(gpu.used_bytes), "of " + fmtBytes(gpu.total_bytes) + " · " + fmtPct(r) + (sv.pressure ? " · pressure!" : ""));
      meter.firstElementChild.style.width = (100 * Math.min(1, r)).toFixed(1) + "%";
      meter.className = "meter" + (sv.pressure ? " err" : r > 0.8 ? " warn" : "");
    } else {
      setTile("tile-gpu", "–", sv ? "no GPU reported" : "no supervisor");
      meter.firstElementChild.style.width = "0";
    }
    setTile("tile-restarts", sv ? fmtNum(sv.restarts) : "–", sv ? "backend " + sv.backend_status + (sv.ribosome_paused && data.helper_model ? " · helper model paused" : "") : "supervisor not running");

    // latency
    lineChart("chart-latency", pts, [
      { name: "p50", color: C.c3, values: series(pts, (p) => p.http && p.http.p50) },
      { name: "p95", color: C.c1, values: series(pts, (p) => p.http && p.http.p95), width: 2.2 },
      { name: "p99", color: C.c2, values: series(pts, (p) => p.http && p.http.p99), dash: true },
    ], { fmt: fmtSec, empty: "No requests yet" });
    legend("legend-latency", ["p50", "p95", "p99"].map((q, i) => ({
      name: q, color: [C.c3, C.c1, C.c2][i], dash: q === "p99", value: fmtSec(lastOf((p) => p.http && p.http[q])),
    })));

    // requests
    barChart("chart-requests", pts, [
      { name: "ok", color: C.c1, values: series(pts, (p) => p.http && p.dt ? (p.http.requests - p.http.errors) / p.dt : null) },
      { name: "5xx", color: C.err, values: series(pts, (p) => p.http && p.dt ? p.http.errors / p.dt : null) },
    ], { fmt: fmtNum, interval: data.interval_s, empty: "No requests yet" });
    legend("legend-requests", [
      { name: "req/s", color: C.c1, box: true, value: fmtNum(lastHttp.http && lastHttp.http.rps) },
      { name: "5xx", color: C.err, box: true, value: fmtNum(http.errors || 0) },
      { name: "total", color: "transparent", box: true, value: fmtNum(http.count || 0) },
    ]);

    // tokens
    barChart("chart-tokens", pts, [
      { name: "in", color: C.c1, values: series(pts, (p) => p.chat && p.chat.tokens_in) },
      { name: "out", color: C.c4, values: series(pts, (p) => p.chat && p.chat.tokens_out) },
    ], { fmt: fmtNum, interval: data.interval_s, empty: "No chat traffic yet" });
    legend("legend-tokens", [
      { name: "in", color: C.c1, box: true, value: fmtNum(chat.tokens_in || 0) },
      { name: "out", color: C.c4, box: true, value: fmtNum(chat.tokens_out || 0) },
      { name: "chats", color: "transparent", box: true, value: fmtNum(chat.count || 0) },
    ]);

    // retrieval stages
    const stageNames = [];
    for (const p of pts) for (const k of Object.keys(get(p, "retrieval.stages_p95", {}))) if (!stageNames.includes(k)) stageNames.push(k);
    for (const k of Object.keys(ret.stages || {})) if (!stageNames.includes(k)) stageNames.push(k);
    stageNames.sort((a, b) => (a === "total") - (b === "total") || a.localeCompare(b));
    const stageSeries = stageNames.map((name, i) => ({
      name: name, color: name === "total" ? C.axis : PALETTE[i % PALETTE.length], width: name === "total" ? 2 : 1.6,
      dash: name === "total", values: series(pts, (p) => get(p, "retrieval.stages_p95." + name, null)),
    }));
    lineChart("chart-retrieval", pts, stageSeries, { fmt: fmtSec, empty: "No answers yet" });
    legend("legend-retrieval", stageSeries.map((st) => ({ name: st.name, color: st.color, dash: st.dash, value: fmtSec(get(ret, "stages." + st.name + ".p95", null)) })));

    // verdicts
    const vnames = ["verified", "stale_risk", "needs_refresh", "no_context"];  // no_context: messages answered with silence
    for (const k of Object.keys(s.verdicts || {})) if (!vnames.includes(k)) vnames.push(k);
    const vSeries = vnames.map((n, i) => ({ name: n, color: VERDICT_COLORS[n] || PALETTE[i % PALETTE.length], values: series(pts, (p) => p.verdicts ? (p.verdicts[n] || 0) : null) }));
    barChart("chart-verdicts", pts, vSeries, { fmt: fmtNum, interval: data.interval_s, empty: "No packets yet" });
    legend("legend-verdicts", vSeries.map((v) => ({ name: v.name.replace("_", " "), color: v.color, box: true, value: fmtNum((s.verdicts || {})[v.name] || 0) })));

    // tiers + zone cap
    const tiers = ret.tiers || {};
    const tnames = TIER_ORDER.filter((t) => t in tiers).concat(Object.keys(tiers).filter((t) => !TIER_ORDER.includes(t)));
    const tierTotal = sumObj(tiers);
    hbars("chart-tiers", tnames.map((t, i) => ({ label: t, value: tiers[t], color: TIER_COLORS[t] || PALETTE[i % PALETTE.length], note: fmtNum(tiers[t]) + " · " + fmtPct(tierTotal ? tiers[t] / tierTotal : null) })), { empty: "No answers yet" });
    const zone = ret.zone_cap || {};
    lineChart("chart-zone", pts, [{ name: "zone cap", color: C.c5, area: true, values: series(pts, (p) => p.retrieval && p.retrieval.zone_cap_avg) }],
      { fmt: fmtNum, small: true, empty: zone.count ? "No capped answers in the window" : "Context cap off or never applied" });
    legend("legend-zone", [{ name: "context cap avg", color: C.c5, value: fmtNum(zone.avg) }, { name: "min–max", color: "transparent", value: isNum(zone.min) ? fmtNum(zone.min) + "–" + fmtNum(zone.max) : "–" }, { name: "capped", color: "transparent", value: fmtNum(zone.count || 0) }]);

    // GPU memory
    const gUsed = series(pts, (p) => p.supervisor && p.supervisor.gpu_used);
    const gTotal = series(pts, (p) => p.supervisor && p.supervisor.gpu_total);
    const gModels = series(pts, (p) => p.supervisor && p.supervisor.models_vram);
    lineChart("chart-gpu", pts, [
      { name: "used", color: C.c3, values: gUsed, area: true, width: 2 },
      { name: "models", color: C.c2, values: gModels },
      { name: "limit", color: C.err, values: gTotal, dash: true, width: 1.4 },
    ], { fmt: fmtBytes, kind: "bytes", empty: sv ? "No GPU reported by the supervisor" : "Supervisor not running" });
    legend("legend-gpu", [
      { name: "used", color: C.c3, value: fmtBytes(gpu && gpu.used_bytes) },
      { name: "models", color: C.c2, value: fmtBytes(sv ? sv.models.reduce((a, m) => a + (m.size_vram || 0), 0) : null) },
      { name: "limit", color: C.err, dash: true, value: fmtBytes(gpu && gpu.total_bytes) },
    ]);
    $("hint-gpu").textContent = gpu && gpu.name ? gpu.name : "used vs limit";

    // resident models
    const models = sv ? sv.models.slice().sort((a, b) => (b.size_vram || 0) - (a.size_vram || 0)) : [];
    hbars("chart-models", models.map((m, i) => ({
      label: m.name, value: m.size_vram || 0, color: PALETTE[i % PALETTE.length],
      note: fmtBytes(m.size_vram) + (m.size ? " / " + fmtBytes(m.size) : ""), title: m.name + ": " + fmtBytes(m.size_vram) + " in VRAM of " + fmtBytes(m.size),
    })), { empty: sv ? "No models resident" : "Supervisor not running", max: gpu && gpu.total_bytes ? Math.max(...models.map((m) => m.size || 0), 1) : 0 });
    $("hint-models").textContent = models.length ? models.length + " resident" : "VRAM per model";
    const mstats = $("stats-models");
    clear(mstats);
    const modelsVram = models.reduce((a, m) => a + (m.size_vram || 0), 0);
    const modelsSize = models.reduce((a, m) => a + (m.size || 0), 0);
    for (const [k, v, cls] of [
      ["in VRAM", sv ? fmtBytes(modelsVram) : "–"],
      ["on CPU", sv ? fmtBytes(Math.max(0, modelsSize - modelsVram)) : "–"],
      ["of GPU", gpu && gpu.total_bytes ? fmtPct(modelsVram / gpu.total_bytes) : "–"],
      ["helper model", !data.helper_model ? "not configured" : sv ? (sv.ribosome_paused ? "paused" : "active") : "–"],
    ]) {
      const d = el("div", {});
      d.appendChild(el("dt", {}, k));
      d.appendChild(el("dd", {}, v));
      mstats.appendChild(d);
    }

    // restarts
    lineChart("chart-restarts", pts, [
      { name: "restarts", color: C.c4, step: true, area: true, values: series(pts, (p) => p.supervisor && p.supervisor.restarts) },
    ], { fmt: fmtNum, kind: "int", empty: "Supervisor not running" });
    const downs = pts.filter((p) => p.supervisor && !p.supervisor.up).length;
    legend("legend-restarts", [
      { name: "restarts", color: C.c4, value: sv ? fmtNum(sv.restarts) : "–" },
      { name: "down samples", color: C.err, value: fmtNum(downs) },
      { name: "pressure", color: sv && sv.pressure ? C.err : C.ok, value: sv ? (sv.pressure ? "high" : "ok") : "–" },
    ]);

    // ingest
    const ing = s.ingest || {};
    lineChart("chart-ingest", pts, [
      { name: "chunks", color: C.c1, area: true, values: series(pts, (p) => p.totals && p.totals.ingest_genes) },
      { name: "files", color: C.c4, values: series(pts, (p) => p.totals && p.totals.ingest_files) },
    ], { fmt: fmtNum, empty: "Nothing ingested yet" });
    legend("legend-ingest", [
      { name: "chunks", color: C.c1, value: fmtNum(ing.genes || 0) },
      { name: "files", color: C.c4, value: fmtNum(ing.files || 0) },
      { name: "bytes", color: "transparent", value: fmtBytes(ing.bytes || 0) },
      { name: "runs", color: "transparent", value: fmtNum(ing.runs || 0) },
    ]);

    // genome + compression
    const byTier = genome.genes_by_tier || {};
    const gtiers = ["open", "aging", "archived"].filter((t) => t in byTier).concat(Object.keys(byTier).filter((t) => !["open", "aging", "archived"].includes(t)));
    hbars("chart-genome", gtiers.map((t, i) => ({ label: t, value: byTier[t], color: TIER_COLORS[t] || PALETTE[i % PALETTE.length] })), { empty: "Index not reported yet" });
    const comp = s.compression || {};
    const stats = $("stats-compression");
    clear(stats);
    const saved = comp.tokens_original ? 1 - comp.tokens_compressed / comp.tokens_original : null;
    for (const [k, v] of [["on disk", fmtBytes(genome.db_bytes)], ["size after", fmtPct(comp.ratio_avg)], ["saved", fmtPct(saved)], ["key terms kept", fmtPct(comp.critical_keep_avg)]]) {
      const d = el("div", {});
      d.appendChild(el("dt", {}, k));
      d.appendChild(el("dd", {}, v));
      stats.appendChild(d);
    }
    $("hint-genome").textContent = genes ? fmtNum(genes) + " indexed chunks" : "indexed chunks by age";

    // routes
    const tbody = document.querySelector("#routes-table tbody");
    clear(tbody);
    const routes = (http.routes || []).slice(0, 30);
    if (!routes.length) {
      const tr = el("tr", {});
      tr.appendChild(el("td", { colspan: "5", class: "muted" }, "No requests yet"));
      tbody.appendChild(tr);
    }
    for (const r of routes) {
      const tr = el("tr", {});
      const td = el("td", { class: "route", title: r.method + " " + r.route });
      td.appendChild(el("span", { class: "method" }, r.method));
      td.appendChild(document.createTextNode(r.route));
      tr.appendChild(td);
      tr.appendChild(el("td", { class: "num" }, fmtNum(r.count)));
      tr.appendChild(el("td", { class: "num" }, fmtSec(r.p50)));
      tr.appendChild(el("td", { class: "num" }, fmtSec(r.p95)));
      tr.appendChild(el("td", { class: "num" + (r.errors ? " err" : "") }, fmtNum(r.errors)));
      tbody.appendChild(tr);
    }
    $("routes-table").dataset.rows = String(routes.length);

    renderActivity(data.activity);

    const b = document.body.dataset;
    b.clipped = JSON.stringify(clippedLabels());
    b.ready = "1";
    b.polls = String(state.polls);
    b.historyPoints = String(pts.length);
    b.requests = String(http.count || 0);
    b.tokensIn = String(chat.tokens_in || 0);
    b.tokensOut = String(chat.tokens_out || 0);
    $("updated").textContent = "updated " + fmtClock(data.at);
    $("updated").title = pts.length + " points · last sample " + (last.t ? fmtAgo(last.t) : "–");
  }

  // Labels a reader cannot read whole: text cut by its box (an ellipsis), an axis label outside its chart,
  // or one y axis repeating a label. The tests read body[data-clipped]; it should stay "[]" at 1280 px.
  function clippedLabels() {
    const out = [];
    for (const node of document.querySelectorAll(".t-label, .t-sub, .stats dt, .stats dd, th, .hint, .legend .item, h2")) {
      if (node.offsetParent !== null && node.scrollWidth > node.clientWidth + 1) out.push(node.textContent.trim());
    }
    for (const chart of document.querySelectorAll(".chart")) {
      const labels = [];
      for (const t of chart.querySelectorAll("svg text[text-anchor=end]")) {
        labels.push(t.textContent);
        if (t.getBBox && t.getBBox().x < 0) out.push(chart.id + ": " + t.textContent);
      }
      if (new Set(labels).size !== labels.length) out.push(chart.id + ": axis repeats " + labels.join(", "));
    }
    return out;
  }

  // activity record: ingests / packets / live-check events of every process on the genome
  function renderActivity(act) {
    const stats = $("stats-activity");
    const tbody = document.querySelector("#activity-table tbody");
    clear(stats);
    clear(tbody);
    if (!act || act.error) {
      const tr = el("tr", {});
      tr.appendChild(el("td", { colspan: "4", class: "muted" }, act && act.error ? "Activity record unreadable: " + act.error : "Nothing indexed yet"));
      tbody.appendChild(tr);
      return;
    }
    const v = act.verdicts || {};
    const live = act.live_check || {};
    for (const [k, val] of [["verified", v.verified], ["may be stale", v.stale_risk], ["re-read needed", v.needs_refresh],
                            ["nothing relevant", v.known_empty], ["re-read", live.refreshed_from_disk], ["left out", live.stale_dropped]]) {
      const d = el("div", {});
      d.appendChild(el("dt", {}, k));
      d.appendChild(el("dd", { "data-key": k }, fmtNum(val || 0)));
      stats.appendChild(d);
    }
    const rows = (act.recent || []).slice(0, 20);
    if (!rows.length) {
      const tr = el("tr", {});
      tr.appendChild(el("td", { colspan: "4", class: "muted" }, "No ingests or packets yet"));
      tbody.appendChild(tr);
    }
    for (const r of rows) {
      const tr = el("tr", { "data-kind": r.kind });
      tr.appendChild(el("td", { title: new Date(r.at * 1000).toLocaleString() }, fmtAgo(r.at)));
      tr.appendChild(el("td", {}, r.kind));
      tr.appendChild(el("td", {}, r.actor));
      tr.appendChild(el("td", { class: "summary" }, r.summary));
      tbody.appendChild(tr);
    }
    const last = (act.ingests || [])[0];
    $("hint-activity").textContent = last ? "last ingest " + fmtAgo(last.at) + " by " + last.actor : "all processes, CLI included";
    $("activity-table").dataset.rows = String(rows.length);
  }

  // ── polling ─────────────────────────────────────────────────────────────
  function mergeHistory(points) {
    const h = state.history;
    for (const p of points || []) if (!h.length || p.t > h[h.length - 1].t) h.push(p);
    const cutoff = (h.length ? h[h.length - 1].t : 0) - WINDOW_S;
    while (h.length && h[0].t < cutoff) h.shift();
    if (h.length) state.lastT = h[h.length - 1].t;
  }

  async function poll() {
    clearTimeout(state.timer);
    try {
      const url = "/dashboard/data" + (state.lastT ? "?since=" + encodeURIComponent(state.lastT) : "");
      const res = await fetch(url, { cache: "no-store", headers: { Accept: "application/json" } });
      if (!res.ok) throw new Error("HTTP " + res.status);
      const data = await res.json();
      state.polls++;
      state.failures = 0;
      mergeHistory(data.history);
      state.last = data;
      render(data);
    } catch (err) {
      state.failures++;
      const banner = $("banner");
      banner.hidden = false;
      banner.className = "banner err";
      banner.textContent = "Cannot reach the backend (" + err.message + "); retrying every " + POLL_MS / 1000 + " s. The charts keep their last data.";
      pill("pill-backend", "backend unreachable", "err");
      document.body.dataset.failures = String(state.failures);
    } finally {
      state.timer = setTimeout(poll, POLL_MS);
    }
  }

  // ── theme ───────────────────────────────────────────────────────────────
  const THEMES = ["auto", "dark", "light"];
  function applyTheme(theme) {
    if (theme === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    const btn = $("theme-toggle");
    btn.title = "Theme: " + theme;
    btn.textContent = theme === "dark" ? "☾" : theme === "light" ? "☀" : "◐";
  }
  function forgetKeyInAddress() {
    // the key came once in the URL (?api_key=); the server set a cookie from it, so the address bar, history
    // and bookmarks need not keep it
    const params = new URLSearchParams(location.search);
    if (!params.has("api_key")) return;
    params.delete("api_key");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  function initTheme() {
    forgetKeyInAddress();
    let theme = new URLSearchParams(location.search).get("theme");
    if (!THEMES.includes(theme)) {
      try { theme = localStorage.getItem("helix-theme"); } catch (e) { theme = null; }
    }
    applyTheme(THEMES.includes(theme) ? theme : "auto");
    $("theme-toggle").addEventListener("click", () => {
      const cur = document.documentElement.dataset.theme || "auto";
      const next = THEMES[(THEMES.indexOf(cur) + 1) % THEMES.length];
      try { localStorage.setItem("helix-theme", next); } catch (e) { /* private mode */ }
      applyTheme(next);
      if (state.last) render(state.last);
    });
  }

  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (state.last) render(state.last); }, 150);
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });

  initTheme();
  poll();
})();
