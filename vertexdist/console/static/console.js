// vertexdist console: live logs (server-sent events), the job's state and replicas, metric charts
// (Chart.js, vendored), a tuning job's metric-against-parameter plots. No inline script: the page's CSP
// allows only the console's own files.
"use strict";

(function () {
  const MAX_LOG_LINES = 5000; // lines kept on the page; older ones are dropped
  const METRICS_EVERY_MS = 5000;
  const COLORS = ["#1a73e8", "#d93025", "#188038", "#f29900", "#9334e6", "#e52592", "#12b5cb", "#5f6368"];
  const charts = new Map();

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function stateBadge(node, state) {
    node.textContent = state;
    node.className = "state state-" + String(state).toLowerCase();
  }

  // --- the job's state and replicas -----------------------------------------------------------
  function showStatus(job, data) {
    stateBadge(document.getElementById("job-state"), data.state);
    const error = document.getElementById("job-error");
    if (error) {
      error.textContent = data.error || "";
      error.hidden = !data.error;
    }
    job.dataset.done = data.done ? "true" : "false";
    // The header's facts as the server words them: Started, Ended, Duration and cost move while it runs.
    for (const [key, value] of Object.entries(data.facts || {})) {
      const fact = document.getElementById("job-" + key);
      if (fact) fact.textContent = value;
    }
    showTimeline(data.timeline);
    const table = document.getElementById("replicas");
    if (!table) return;
    for (const r of data.replicas) {
      const row = table.querySelector('tr[data-replica="' + CSS.escape(r.name) + '"]');
      if (!row) continue;
      stateBadge(row.querySelector(".state"), r.state);
      row.querySelector(".exit").textContent = r.exit_code === null ? "—" : String(r.exit_code);
      row.lastElementChild.textContent = String(r.attempt);
    }
  }

  function showTimeline(steps) {
    const list = document.getElementById("timeline");
    if (!list || !steps || !steps.length) return;
    list.replaceChildren(...steps.map((step) => {
      const item = el("li");
      item.append(el("time", {}, step.time), " ");
      if (step.replica) item.append(el("span", { class: "who" }, step.replica), " ");
      const badge = el("span");
      stateBadge(badge, step.state);
      item.append(badge);
      if (step.exit_code !== null) item.append(" exit code " + step.exit_code);
      if (step.message) item.append(" ", el("span", { class: "msg" }, step.message));
      return item;
    }));
  }

  // --- logs -------------------------------------------------------------------------------------
  function followLogs(job) {
    const box = document.getElementById("logs");
    if (!box) return;
    const live = document.getElementById("log-live");
    const replica = document.getElementById("log-replica");
    const severity = document.getElementById("log-severity");
    let source = null;

    function open() {
      if (source) source.close();
      box.replaceChildren();
      const params = new URLSearchParams();
      if (replica.value) params.set("replica", replica.value);
      if (severity.value) params.set("severity", severity.value);
      source = new EventSource(box.dataset.src + (params.toString() ? "?" + params : ""));
      live.textContent = job.dataset.done === "true" ? "" : "live";
      source.addEventListener("lines", (event) => {
        const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
        const fragment = document.createDocumentFragment();
        for (const line of JSON.parse(event.data)) {
          const row = el("div", { class: "line sev-" + line.s.toLowerCase(), "data-replica": line.r, "data-severity": line.s });
          row.append(el("span", { class: "who" }, line.r), el("span", { class: "sev" }, line.s), el("span", { class: "text" }, line.x));
          fragment.append(row);
        }
        box.append(fragment);
        while (box.childElementCount > MAX_LOG_LINES) box.firstElementChild.remove();
        if (atBottom) box.scrollTop = box.scrollHeight;
      });
      source.addEventListener("status", (event) => showStatus(job, JSON.parse(event.data)));
      source.addEventListener("problem", (event) => { live.textContent = JSON.parse(event.data).message; });
      source.addEventListener("end", () => {
        source.close();
        live.textContent = "";
        if (!box.childElementCount) box.append(el("p", { class: "empty" }, "No log lines."));
      });
      source.onerror = () => { if (job.dataset.done !== "true") live.textContent = "reconnecting…"; };
    }
    replica.addEventListener("change", open);
    severity.addEventListener("change", open);
    open();
  }

  // --- charts -----------------------------------------------------------------------------------
  function lineChart(container, id, title, xLabel, datasets) {
    let chart = charts.get(id);
    if (chart) {
      chart.data.datasets = datasets;
      chart.update("none");
      return;
    }
    const figure = el("figure", { class: "chart", "data-tag": title });
    figure.append(el("figcaption", {}, title));
    const canvas = el("canvas", { "aria-label": title, role: "img" });
    figure.append(canvas);
    container.append(figure);
    chart = new Chart(canvas, {
      type: "line",
      data: { datasets },
      options: {
        animation: false,
        parsing: false,
        normalized: true,
        scales: {
          x: { type: "linear", title: { display: true, text: xLabel }, ticks: { precision: 0 } },
          y: { type: "linear" },
        },
        plugins: { legend: { display: datasets.length > 1 } },
      },
    });
    charts.set(id, chart);
  }
  // An ended job's ranks: a bar per rank from zero, stragglers in amber (the Ranks panel's /api/ranks `bars`).
  function barChart(container, id, bars) {
    if (charts.has(id)) return;
    const figure = el("figure", { class: "chart", "data-tag": bars.title });
    figure.append(el("figcaption", {}, bars.title));
    const canvas = el("canvas", { "aria-label": bars.title, role: "img" });
    figure.append(canvas);
    container.append(figure);
    const colors = bars.stragglers.map((late) => (late ? "#b06000" : COLORS[0]));
    charts.set(id, new Chart(canvas, {
      type: "bar",
      data: { labels: bars.labels, datasets: [{ label: "own step time (s)", data: bars.values, backgroundColor: colors }] },
      options: {
        animation: false,
        scales: { y: { type: "linear", beginAtZero: true, title: { display: true, text: "s" } } },
        plugins: { legend: { display: false } },
      },
    }));
  }
  window.vertexdistCharts = { lineChart, COLORS }; // registry.js's comparison charts draw with these

  async function drawMetrics(job) {
    const box = document.getElementById("metrics");
    if (!box) return;
    let data;
    try {
      const answer = await fetch(box.dataset.src, { headers: { accept: "application/json" } });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      data = await answer.json();
    } catch (error) {
      const empty = document.getElementById("metrics-empty");
      if (empty) empty.textContent = "Metrics could not be read: " + error.message;
      return;
    }
    const byTag = new Map();
    for (const s of data.series) {
      if (!byTag.has(s.tag)) byTag.set(s.tag, []);
      byTag.get(s.tag).push(s);
    }
    const empty = document.getElementById("metrics-empty");
    if (byTag.size && empty) empty.remove();
    if (!byTag.size && empty && data.problem) {
      // Not read is not "none written": say why (the emulator's storage unreachable, ...).
      empty.textContent = "Metrics could not be read: " + data.problem;
    } else if (!byTag.size && empty) {
      empty.textContent = "No metrics: the job wrote no TensorBoard scalars to AIP_TENSORBOARD_LOG_DIR" +
        (job.dataset.tuning === "true" ? " and its trials reported no measurements yet." : ".");
    }
    for (const [tag, series] of byTag) {
      const datasets = series.map((s, i) => ({
        label: s.run === "." ? tag : s.run,
        data: s.points.map(([x, y]) => ({ x, y })),
        borderColor: COLORS[i % COLORS.length],
        backgroundColor: COLORS[i % COLORS.length],
        pointRadius: s.points.length > 60 ? 0 : 2,
        borderWidth: 1.5,
      }));
      lineChart(box, "metric:" + tag, tag, series[0].x, datasets);
    }
    if (job.dataset.done !== "true") setTimeout(() => drawMetrics(job), METRICS_EVERY_MS);
  }

  // --- ranks: the `vertexdist ranks` table and each rank's own step time, from its heartbeats ---------
  const RANKS_EVERY_MS = 2000;
  const rankPoints = new Map(); // rank -> [{x: step, y: own step s}], gathered while the page is open

  async function drawRanks(job) {
    const box = document.getElementById("ranks");
    if (!box) return;
    const note = document.getElementById("ranks-note");
    let data;
    try {
      const answer = await fetch(box.dataset.src, { headers: { accept: "application/json" } });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      data = await answer.json();
    } catch (error) {
      note.textContent = "Rank health could not be read: " + error.message;
      if (job.dataset.done !== "true") setTimeout(() => drawRanks(job), RANKS_EVERY_MS);
      return;
    }
    const table = document.getElementById("ranks-table");
    const verdict = document.getElementById("ranks-verdict");
    verdict.textContent = data.verdict || "";
    verdict.hidden = !data.verdict;
    if (data.note || !data.rows.length) {
      note.textContent = data.note || "No heartbeats yet: no rank has made its first step.";
      note.hidden = false;
      table.hidden = true;
    } else {
      note.hidden = true;
      table.hidden = false;
      table.tHead.rows[0].replaceChildren(...data.columns.map((head) => el("th", {}, head)));
      table.tBodies[0].replaceChildren(...data.rows.map((r) => {
        const marks = [r.straggler ? "straggler" : "", r.culprit ? "culprit" : ""].filter(Boolean);
        const row = el("tr", { "data-rank": String(r.rank), class: marks.join(" ") });
        r.cells.forEach((text, i) => {
          const cell = el("td", {}, text);
          if (i === 0 && r.culprit) cell.append(" ", el("span", { class: "mark culprit-mark", title: "the rank the others wait for" }, "culprit"));
          if (i === 0 && r.straggler) cell.append(" ", el("span", { class: "mark straggler-mark", title: "slower than the other ranks" }, "straggler"));
          row.append(cell);
        });
        return row;
      }));
      for (const r of data.rows) {
        if (r.own_step_s === null) continue;
        const points = rankPoints.get(r.rank) || [];
        if (!points.length || points[points.length - 1].x < r.step) points.push({ x: r.step, y: r.own_step_s });
        rankPoints.set(r.rank, points);
      }
      const datasets = [...rankPoints.entries()].sort((a, b) => a[0] - b[0]).map(([rank, points], i) => ({
        label: "rank " + rank,
        data: points,
        borderColor: COLORS[i % COLORS.length],
        backgroundColor: COLORS[i % COLORS.length],
        pointRadius: points.length > 60 ? 0 : 2,
        borderWidth: 1.5,
      }));
      if (data.bars && !datasets.some((d) => d.data.length > 1)) {
        barChart(document.getElementById("ranks-charts"), "ranks:ended", data.bars); // one heartbeat per rank
      } else if (datasets.some((d) => d.data.length)) {
        lineChart(document.getElementById("ranks-charts"), "ranks:own-step", "own step time per rank (s)", "step", datasets);
      }
    }
    if (job.dataset.done !== "true" && !data.ended) setTimeout(() => drawRanks(job), RANKS_EVERY_MS);
  }

  function drawTrials() {
    const holder = document.getElementById("trial-data");
    const box = document.getElementById("trial-charts");
    if (!holder || !box) return;
    const data = JSON.parse(holder.textContent);
    for (const name of data.parameters) {
      const points = data.points[name] || [];
      if (!points.length) continue;
      const categorical = points.some((p) => typeof p.x === "string");
      const labels = categorical ? [...new Set(points.map((p) => String(p.x)))] : undefined;
      const figure = el("figure", { class: "chart", "data-parameter": name });
      figure.append(el("figcaption", {}, data.metric + " against " + name));
      const canvas = el("canvas", { "aria-label": data.metric + " against " + name, role: "img" });
      figure.append(canvas);
      box.append(figure);
      const other = points.filter((p) => !p.best);
      const best = points.filter((p) => p.best);
      const xy = (p) => ({ x: categorical ? String(p.x) : p.x, y: p.y, trial: p.trial });
      charts.set("trial:" + name, new Chart(canvas, {
        type: "scatter",
        data: {
          labels,
          datasets: [
            { label: "trials", data: other.map(xy), backgroundColor: COLORS[0], pointRadius: 4 },
            { label: "best", data: best.map(xy), backgroundColor: COLORS[1], pointRadius: 8, pointStyle: "star", borderColor: COLORS[1] },
          ],
        },
        options: {
          animation: false,
          scales: {
            x: {
              type: categorical ? "category" : (data.log.includes(name) ? "logarithmic" : "linear"),
              title: { display: true, text: name + (data.log.includes(name) ? " (log scale)" : "") },
            },
            y: { title: { display: true, text: data.metric } },
          },
          plugins: {
            tooltip: { callbacks: { label: (ctx) => "trial " + ctx.raw.trial + ": " + ctx.raw.y } },
          },
        },
      }));
    }
  }

  function refreshList() {
    const table = document.getElementById("jobs") || document.getElementById("pipeline");
    if (table && table.dataset.refresh) {
      setTimeout(() => window.location.reload(), Number(table.dataset.refresh) * 1000);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    refreshList();
    const job = document.getElementById("job");
    if (!job) return;
    followLogs(job);
    drawMetrics(job);
    drawRanks(job);
    drawTrials();
  });
})();
