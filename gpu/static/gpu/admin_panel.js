/* Live panel on the Node and GPU admin change pages (one node's stream, optionally one GPU). */
(function () {
  "use strict";
  var panel = document.querySelector(".gpu-live-panel[data-gpu-live]");
  if (!panel || !window.GpuLive) { return; }
  var only = panel.getAttribute("data-gpu-filter");
  var body = panel.querySelector("tbody");
  var statusLine = panel.querySelector(".gpu-live-status");

  function rowFor(uuid) {
    var tr = body.querySelector("tr[data-uuid='" + uuid + "']");
    if (tr) { return tr; }
    tr = document.createElement("tr");
    tr.setAttribute("data-uuid", uuid);
    for (var i = 0; i < 6; i += 1) { tr.appendChild(document.createElement("td")); }
    body.appendChild(tr);
    return tr;
  }

  window.GpuLive.connect(panel.getAttribute("data-gpu-live"), {
    message: function (message) {
      if (message.type !== "gpu.samples") { return; }
      Object.keys(message.gpus).sort().forEach(function (uuid) {
        if (only && uuid !== only) { return; }
        var frame = message.gpus[uuid];
        var d = window.GpuLive.describe(frame);
        var cells = rowFor(uuid).children;
        [frame.node + "/" + frame.index, d.util, d.mem, d.temp, d.power, d.users].forEach(function (text, i) {
          cells[i].textContent = text;
        });
      });
    },
    status: function (text) { if (statusLine) { statusLine.textContent = text; } }
  });
})();
