/* The cluster map: every GPU a tile, updated from ws/cluster/ frames (at most one per second). */
(function () {
  "use strict";
  var map = document.querySelector("[data-gpu-live-map]");
  if (!map || !window.GpuLive) { return; }
  var statusLine = document.querySelector("[data-gpu-status]");
  var frames = 0;

  function field(tile, name) { return tile.querySelector("[data-field='" + name + "']"); }

  function paint(uuid, frame) {
    var tile = map.querySelector(".gpu-tile[data-uuid='" + uuid + "']");
    if (!tile) { return; }
    var d = window.GpuLive.describe(frame);
    field(tile, "util").textContent = d.util;
    field(tile, "mem").textContent = d.mem;
    field(tile, "temp").textContent = d.temp;
    field(tile, "power").textContent = d.power;
    field(tile, "users").textContent = d.users;
    window.GpuLive.setBar(field(tile, "bar"), d.pct);
    tile.setAttribute("data-health", frame.health || "unknown");
    tile.setAttribute("data-ts", frame.ts || "");
    tile.classList.toggle("gpu-tile-mine", Boolean(frame.mine));
    tile.classList.toggle("gpu-tile-redacted", Boolean(frame.redacted));
  }

  function paintNode(name, state) {
    var card = map.querySelector(".gpu-node[data-node='" + name + "']");
    if (!card) { return; }
    var label = state.deleted ? "deleted" : state.cordoned ? "cordoned" : state.ready ? "ready" : "not ready";
    card.querySelector("[data-node-state]").textContent = label;
    card.classList.toggle("gpu-node-cordoned", Boolean(state.cordoned));
    paintHeld(card, state.held_for);
  }

  // A node the queue holds for a waiting job of several workers (the server redacts whose).
  function paintHeld(card, heldFor) {
    var note = card.querySelector("[data-node-held]");
    if (!heldFor) {
      if (note) { note.remove(); }
      return;
    }
    if (!note) {
      note = document.createElement("small");
      note.className = "gpu-node-held";
      note.setAttribute("data-node-held", "");
      card.querySelector("header").appendChild(note);
    }
    note.textContent = "held for " + heldFor + " as its GPUs free up";
  }

  function onMessage(message) {
    if (message.type === "gpu.samples") {
      Object.keys(message.gpus).forEach(function (uuid) { paint(uuid, message.gpus[uuid]); });
      frames += 1;
      map.setAttribute("data-frames", String(frames));
    } else if (message.type === "node.state") {
      Object.keys(message.nodes).forEach(function (name) { paintNode(name, message.nodes[name]); });
    }
  }

  var initial = window.GpuLive.readJson("gpu-initial") || {};
  Object.keys(initial).forEach(function (uuid) { paint(uuid, initial[uuid]); });
  window.GpuLive.connect(map.getAttribute("data-gpu-live-map"), {
    message: onMessage,
    status: function (text) { if (statusLine) { statusLine.textContent = text; } }
  });
})();
