/* A node page: per GPU, the last 15 minutes (from the page) plus live frames, in Chart.js charts.
   Without Chart.js (blocked, failed to load) the numbers still update live; only the charts are gone. */
(function () {
  "use strict";
  var root = document.querySelector("[data-gpu-node]");
  if (!root || !window.GpuLive) { return; }
  var MAX_POINTS = 900;
  var charts = {};
  var statusLine = document.querySelector("[data-gpu-status]");

  function label(ts) { return (ts || "").slice(11, 19); }

  function makeChart(uuid) {
    var canvas = root.querySelector("canvas[data-uuid='" + uuid + "']");
    if (!canvas || !window.Chart) { return null; }
    return new window.Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [
        { label: "GPU util %", data: [], borderWidth: 1, pointRadius: 0 },
        { label: "memory %", data: [], borderWidth: 1, pointRadius: 0 }
      ] },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 scales: { y: { min: 0, max: 100 } }, plugins: { legend: { position: "bottom" } } }
    });
  }

  function push(uuid, frame, update) {
    var chart = charts[uuid] || (charts[uuid] = makeChart(uuid));
    if (!chart || frame.redacted) { return; }
    chart.data.labels.push(label(frame.ts));
    chart.data.datasets[0].data.push(frame.util_gpu);
    chart.data.datasets[1].data.push(Math.round(100 * frame.mem_used_mib / Math.max(1, frame.mem_total_mib)));
    if (chart.data.labels.length > MAX_POINTS) {
      chart.data.labels.shift();
      chart.data.datasets.forEach(function (ds) { ds.data.shift(); });
    }
    if (update) { chart.update("none"); }
  }

  function paintNow(uuid, frame) {
    var card = root.querySelector(".gpu-card[data-uuid='" + uuid + "']");
    if (!card) { return; }
    var d = window.GpuLive.describe(frame);
    ["util", "mem", "temp", "power", "users"].forEach(function (name) {
      var el = card.querySelector("[data-field='" + name + "']");
      if (el) { el.textContent = d[name]; }
    });
  }

  var history = window.GpuLive.readJson("gpu-history") || {};
  Object.keys(history).forEach(function (uuid) {
    history[uuid].forEach(function (frame) { push(uuid, frame, false); });
    if (history[uuid].length) { paintNow(uuid, history[uuid][history[uuid].length - 1]); }
    if (charts[uuid]) { charts[uuid].update("none"); }
  });

  window.GpuLive.connect(root.getAttribute("data-gpu-node"), {
    message: function (message) {
      if (message.type !== "gpu.samples") { return; }
      Object.keys(message.gpus).forEach(function (uuid) {
        push(uuid, message.gpus[uuid], true);
        paintNow(uuid, message.gpus[uuid]);
      });
    },
    status: function (text) { if (statusLine) { statusLine.textContent = text; } }
  });
})();
