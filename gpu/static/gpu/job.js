/* The job page's telemetry panel: this job's GPUs and its own processes' share of each. */
(function () {
  "use strict";
  var panel = document.querySelector("[data-gpu-job]");
  if (!panel || !window.GpuLive) { return; }
  var list = panel.querySelector("[data-gpu-job-gpus]");
  var statusLine = panel.querySelector("[data-gpu-status]");
  var peaks = {};

  function row(uuid) {
    var el = list.querySelector("[data-uuid='" + uuid + "']");
    if (el) { return el; }
    el = document.createElement("div");
    el.className = "gpu-job-gpu";
    el.setAttribute("data-uuid", uuid);
    ["title", "util", "own", "peak"].forEach(function (name) {
      var p = document.createElement("p");
      p.setAttribute("data-field", name);
      el.appendChild(p);
    });
    var bar = document.createElement("div");
    bar.className = "gpu-bar";
    var fill = document.createElement("span");
    fill.setAttribute("data-field", "bar");
    bar.appendChild(fill);
    el.appendChild(bar);
    list.appendChild(el);
    return el;
  }

  function paint(uuid, frame) {
    var el = row(uuid);
    var own = (frame.processes || []).reduce(function (sum, p) { return sum + p.mem_used_mib; }, 0);
    peaks[uuid] = Math.max(peaks[uuid] || 0, own);
    var mode = frame.sharing_mode === "shared" ? "shared (MPS)" : "exclusive";
    el.querySelector("[data-field='title']").textContent = frame.node + " GPU " + frame.index + " · " + mode;
    el.querySelector("[data-field='util']").textContent = "GPU utilisation " + frame.util_gpu + "%";
    el.querySelector("[data-field='own']").textContent =
      "This job's memory " + window.GpuLive.gib(own) + " of " + window.GpuLive.gib(frame.mem_total_mib) + " GiB";
    el.querySelector("[data-field='peak']").textContent = "Peak seen " + window.GpuLive.gib(peaks[uuid]) + " GiB";
    window.GpuLive.setBar(el.querySelector("[data-field='bar']"), frame.util_gpu);
  }

  window.GpuLive.connect(panel.getAttribute("data-gpu-job"), {
    message: function (message) {
      if (message.type !== "gpu.samples") { return; }
      Object.keys(message.gpus).forEach(function (uuid) { paint(uuid, message.gpus[uuid]); });
    },
    status: function (text) { if (statusLine) { statusLine.textContent = text; } }
  });
})();
