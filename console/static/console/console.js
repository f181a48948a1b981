// The console's one script: it refreshes what a page shows, without a
// reload, by fetching the same part of the page again from the waker; and
// it prints a chart's values under it for the bucket the pointer is on.
// Every page works without it (a bucket's values are its <title> too).
// Penelope's own code, under the project's licence.
(function () {
  "use strict";
  // The bucket pointed at: its chart's title and its index, so a refresh
  // that redraws the charts shows it again.
  var pointed = null;

  function show(rect) {
    var figure = rect.closest("figure.chart");
    var readout = figure && figure.querySelector("[data-readout]");
    var title = rect.querySelector("title");
    if (!readout || !title) { return; }
    readout.textContent = title.textContent;
    readout.classList.add("shown");
    var cursor = figure.querySelector("line.cursor");
    if (cursor) {
      cursor.setAttribute("x1", rect.getAttribute("data-x"));
      cursor.setAttribute("x2", rect.getAttribute("data-x"));
      cursor.classList.add("shown");
    }
    pointed = { chart: figure.getAttribute("data-chart"), bucket: rect.getAttribute("data-bucket") };
  }

  function hide(figure) {
    var readout = figure.querySelector("[data-readout]");
    var cursor = figure.querySelector("line.cursor");
    if (readout) { readout.textContent = readout.getAttribute("data-hint") || ""; readout.classList.remove("shown"); }
    if (cursor) { cursor.classList.remove("shown"); }
    pointed = null;
  }

  function showPointed(root) {
    if (!pointed) { return; }
    root.querySelectorAll("figure.chart").forEach(function (figure) {
      if (figure.getAttribute("data-chart") !== pointed.chart) { return; }
      var rect = figure.querySelector('rect.hit[data-bucket="' + pointed.bucket + '"]');
      if (rect) { show(rect); }
    });
  }

  document.querySelectorAll("[data-readout]").forEach(function (readout) {
    readout.setAttribute("data-hint", readout.textContent);
  });
  document.addEventListener("mouseover", function (event) {
    var rect = event.target.closest ? event.target.closest("rect.hit") : null;
    if (rect) { show(rect); }
  });
  document.addEventListener("mouseout", function (event) {
    var from = event.target.closest ? event.target.closest("figure.chart svg") : null;
    var to = event.relatedTarget && event.relatedTarget.closest ? event.relatedTarget.closest("figure.chart svg") : null;
    if (from && from !== to) { hide(from.closest("figure.chart")); }
  });

  function refresh(element) {
    var url = element.getAttribute("data-refresh-url");
    var seconds = parseFloat(element.getAttribute("data-refresh-s")) || 5;
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (answer) {
          if (answer.redirected || !answer.ok) { throw new Error("status " + answer.status); }
          return answer.text();
        })
        .then(function (html) {
          element.innerHTML = html;
          element.querySelectorAll("[data-readout]").forEach(function (readout) {
            readout.setAttribute("data-hint", readout.textContent);
          });
          showPointed(element);
          element.setAttribute("data-refreshed-at", String(Date.now()));
          document.body.classList.remove("stale");
        })
        .catch(function () { document.body.classList.add("stale"); })
        .finally(function () { setTimeout(tick, seconds * 1000); });
    }
    setTimeout(tick, seconds * 1000);
  }
  document.querySelectorAll("[data-refresh-url]").forEach(refresh);
})();
