// GPU-hours per user per day on the project usage page. Data comes from the json_script tag
// "usage-data" (Chart.js shape: labels + datasets); no inline script (CSP).
(function () {
  "use strict";
  function draw() {
    var source = document.getElementById("usage-data");
    var canvas = document.getElementById("usage-chart");
    if (!source || !canvas || typeof window.Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    data.datasets.forEach(function (d) { d.tension = 0.2; d.fill = false; });
    new window.Chart(canvas, {
      type: "line",
      data: data,
      options: {
        responsive: true,
        interaction: { mode: "index", intersect: false },
        scales: { y: { beginAtZero: true, title: { display: true, text: "GPU-hours" } } },
      },
    });
    // Allocated next to used (busy) GPU-hours per GPU type, when the page has them.
    var types = document.getElementById("usage-type-data");
    var bars = document.getElementById("usage-type-chart");
    if (!types || !bars) return;
    new window.Chart(bars, {
      type: "bar",
      data: JSON.parse(types.textContent),
      options: { responsive: true, scales: { y: { beginAtZero: true, title: { display: true, text: "GPU-hours" } } } },
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
