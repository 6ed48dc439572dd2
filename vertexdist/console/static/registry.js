// vertexdist console: an experiment's runs side by side, each metric's time series of every run on one chart
// (console.js's lineChart). Names and values go in as textContent only.
"use strict";

(function () {
  async function drawComparison() {
    const box = document.getElementById("comparison");
    if (!box || !window.vertexdistCharts) return;
    const { lineChart, COLORS } = window.vertexdistCharts;
    const empty = document.getElementById("comparison-empty");
    let data;
    try {
      const answer = await fetch(box.dataset.src, { headers: { accept: "application/json" } });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      data = await answer.json();
    } catch (error) {
      if (empty) empty.textContent = "The time series could not be read: " + error.message;
      return;
    }
    const byTag = new Map(); // metric -> [{run, points}]
    for (const run of data.runs) {
      for (const [tag, points] of Object.entries(run.series || {})) {
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push({ run: run.run, points });
      }
    }
    if (!byTag.size) {
      if (empty) empty.textContent = data.problem || "No time series: the runs logged none.";
      return;
    }
    if (empty) empty.remove();
    for (const [tag, series] of byTag) {
      const datasets = series.map((s, i) => ({
        label: s.run,
        data: s.points.map(([x, y]) => ({ x, y })),
        borderColor: COLORS[i % COLORS.length],
        backgroundColor: COLORS[i % COLORS.length],
        pointRadius: s.points.length > 60 ? 0 : 2,
        borderWidth: 1.5,
      }));
      lineChart(box, "run-series:" + tag, tag, "step", datasets);
    }
  }

  document.addEventListener("DOMContentLoaded", drawComparison);
})();
