// Follows a job's log: the API streams text lines while the pod runs, then the kept tail. A job of
// several workers has a choice of worker: choosing one stops the stream and follows that worker's.
(function () {
  "use strict";
  const pre = document.getElementById("job-log");
  if (!pre) { return; }
  const choice = document.getElementById("log-worker");
  let controller = null;
  async function follow() {
    if (controller) { controller.abort(); }
    const own = new AbortController();
    controller = own;
    const decoder = new TextDecoder();
    let url = pre.dataset.logUrl;
    if (choice && choice.value !== "") { url += "&worker=" + encodeURIComponent(choice.value); }
    pre.textContent = "";
    delete pre.dataset.done;
    const response = await fetch(url, { credentials: "same-origin", signal: own.signal });
    if (!response.ok || !response.body) {
      pre.textContent = "The log is not available (" + response.status + ").";
      return;
    }
    const reader = response.body.getReader();
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) { break; }
      pre.append(decoder.decode(chunk.value, { stream: true }));
    }
    pre.dataset.done = "1";
  }
  function start() {
    follow().catch(function (err) {
      if (err.name !== "AbortError") { pre.textContent = "Log stream failed: " + err; }
    });
  }
  if (choice) { choice.addEventListener("change", start); }
  start();
})();
