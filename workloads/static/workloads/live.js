// Live job states: one websocket, messages of type "job.state" update rows in place. The socket is
// told which jobs the page shows and sends their current state first (on every (re)connect), then
// each change: a change between the page's render and the socket's connect is not missed.
(function () {
  "use strict";
  const root = document.querySelector("[data-live-socket]");
  if (!root) { return; }
  const status = document.getElementById("live-status");
  let delay = 1000;

  function label(state) { return state.charAt(0).toUpperCase() + state.slice(1); }

  function apply(msg) {
    document.querySelectorAll('[data-job="' + msg.job + '"]').forEach(function (row) {
      const state = row.querySelector('[data-field="state"]');
      if (state) {
        const mark = document.createElement("mark");
        mark.className = "state state-" + msg.state;
        mark.textContent = label(msg.state);
        state.replaceChildren(mark);
      }
      const reason = row.querySelector('[data-field="reason"]');
      if (reason) { reason.textContent = msg.reason_line; }
      const code = row.querySelector('[data-field="exit_code"]');
      if (code && msg.exit_code !== null) { code.textContent = String(msg.exit_code); }
      const queue = row.querySelector('[data-field="queue"]');
      if (queue) { queue.textContent = msg.queue ? msg.queue.text : ""; }
      const node = row.querySelector('[data-field="node"]');
      if (node && msg.node) { node.textContent = msg.node; }
    });
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const shown = new Set();
    document.querySelectorAll("[data-job]").forEach(function (row) { shown.add(row.dataset.job); });
    const query = shown.size ? "?jobs=" + Array.from(shown).slice(0, 200).join(",") : "";
    const socket = new WebSocket(scheme + window.location.host + root.dataset.liveSocket + query);
    socket.addEventListener("open", function () {
      if (status) { status.textContent = "live"; }
      delay = 1000;
    });
    socket.addEventListener("message", function (event) {
      const msg = JSON.parse(event.data);
      if (msg.type === "job.state") { apply(msg); }
    });
    socket.addEventListener("close", function () {
      if (status) { status.textContent = "reconnecting…"; }
      window.setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    });
  }
  connect();
})();
