/* Live GPU streams: one websocket per view, reconnecting by itself with capped, jittered backoff.
   CSP-safe: no inline code; bar widths go through a CSS custom property (CSSOM, not style attrs). */
(function () {
  "use strict";

  function connect(path, handlers) {
    var attempt = 0;
    var socket = null;
    var stopped = false;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    function status(text) {
      if (handlers.status) { handlers.status(text); }
    }
    function open() {
      socket = new WebSocket(scheme + window.location.host + path);
      socket.onopen = function () { attempt = 0; status("Live"); };
      socket.onmessage = function (event) {
        var message;
        try { message = JSON.parse(event.data); } catch (e) { return; }
        handlers.message(message);
      };
      socket.onclose = function () {
        if (stopped) { return; }
        var delay = Math.min(30000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() / 2);
        attempt += 1;
        status("Reconnecting…");
        window.setTimeout(open, delay);
      };
    }
    open();
    return { close: function () { stopped = true; if (socket) { socket.close(); } } };
  }

  function gib(mib) { return (mib / 1024).toFixed(1); }

  // Names people read for the pods on the GPUs: the job API lists the running jobs this user may
  // see (every page of it, again each half minute); a pod of a job not listed keeps namespace/pod.
  var jobNames = {};
  var JOB_POD = /^job-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-/;
  function loadJobNames() {
    var names = {};
    function page(url) {
      return fetch(url, { credentials: "same-origin" }).then(function (response) {
        if (!response.ok) { return null; }
        return response.json().then(function (body) {
          (body.results || []).forEach(function (job) {
            names[job.id] = (job.name || "job " + job.id.slice(0, 8)) + " (" + job.owner + ")";
          });
          if (body.next) { return page(body.next); }
          jobNames = names;
          return null;
        });
      });
    }
    return page("/api/v1/jobs/?state=running").catch(function () { return null; });
  }

  function podLabel(p) {
    var match = JOB_POD.exec(p.pod_name || "");
    if (match && jobNames[match[1]]) { return jobNames[match[1]]; }
    return p.pod_namespace + "/" + (p.pod_name || "?");
  }

  function users(frame) {
    if (frame.redacted) { return frame.busy ? "in use" : "free"; }
    var seen = {};
    (frame.processes || []).forEach(function (p) {
      var who = p.pod_namespace ? podLabel(p) : "pid " + p.pid;
      seen[who] = true;
    });
    var names = Object.keys(seen);
    if (frame.others) { names.push(frame.others + " other"); }
    return names.length ? names.join(", ") : "idle";
  }

  function describe(frame) {
    if (frame.redacted) {
      return { util: frame.busy ? "busy" : "free", pct: frame.busy ? 100 : 0, mem: "–", temp: "–",
               power: "–", users: users(frame) };
    }
    return {
      util: frame.util_gpu + "%",
      pct: frame.util_gpu,
      mem: gib(frame.mem_used_mib) + " / " + gib(frame.mem_total_mib) + " GiB",
      temp: Math.round(frame.temp_c) + " °C",
      power: Math.round(frame.power_w) + " W",
      users: users(frame)
    };
  }

  function setBar(element, pct) {
    if (element) { element.style.setProperty("--pct", Math.max(0, Math.min(100, pct)) + "%"); }
  }

  function readJson(id) {
    var node = document.getElementById(id);
    if (!node) { return null; }
    try { return JSON.parse(node.textContent); } catch (e) { return null; }
  }

  if (document.querySelector("[data-field='users']")) {
    loadJobNames();
    window.setInterval(loadJobNames, 30000);
  }
  window.GpuLive = { connect: connect, describe: describe, setBar: setBar, readJson: readJson, gib: gib };
})();
