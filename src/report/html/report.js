(function () {
  "use strict";
  var root = document.documentElement;
  var key = "helixflow-report:" + root.getAttribute("data-run");
  var scroller = document.querySelector("#dag .scroll");

  // Where the reader was (scroll, open details), kept across the reloads of a live report.
  function save() {
    var open = [], closed = [];
    document.querySelectorAll("details[id]").forEach(function (d) {
      (d.open ? open : closed).push(d.id);
    });
    var state = { x: window.scrollX, y: window.scrollY, open: open, closed: closed,
                  dag: scroller ? scroller.scrollLeft : 0, at: Date.now() };
    try { sessionStorage.setItem(key, JSON.stringify(state)); } catch (e) { /* storage off */ }
  }

  // Only right after the page reloaded itself: a reader who comes back later, or follows a link
  // into the page, lands where the address says.
  function restore() {
    var state = null;
    try { state = JSON.parse(sessionStorage.getItem(key) || "null"); } catch (e) { state = null; }
    if (!state || !(Date.now() - (state.at || 0) < 30000)) { return false; }
    (state.open || []).forEach(function (id) {
      var d = document.getElementById(id);
      if (d && d.tagName === "DETAILS") { d.open = true; }
    });
    (state.closed || []).forEach(function (id) {
      var d = document.getElementById(id);
      if (d && d.tagName === "DETAILS") { d.open = false; }
    });
    if (scroller) { scroller.scrollLeft = state.dag || 0; }
    window.scrollTo(state.x || 0, state.y || 0);
    return true;
  }

  var restored = restore();
  var live = parseInt(root.getAttribute("data-live") || "0", 10);
  if (live > 0) {
    var reloading = false;
    window.setTimeout(function () { reloading = true; save(); location.reload(); }, live * 1000);
    // The page stays up a moment after the reload is asked for: what the reader does then (a
    // scroll, an attempt closed) is saved again as the page goes.
    window.addEventListener("pagehide", function () { if (reloading) { save(); } });
  } else {
    try { sessionStorage.removeItem(key); } catch (e) { /* storage off */ }
  }

  // A link to an attempt or a file opens it, and the details around it.
  function reveal() {
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
    if (target) { target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", reveal);
  if (location.hash && !restored) { reveal(); }

  // Keys: j and k move between phases, o opens or closes every attempt.
  var phases = Array.prototype.slice.call(document.querySelectorAll("section.phase"));
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA") { return; }
    if (event.key === "j" || event.key === "k") {
      var at = phases.indexOf(document.activeElement && document.activeElement.closest
        ? document.activeElement.closest("section.phase") : null);
      var next = event.key === "j" ? at + 1 : (at < 0 ? phases.length - 1 : at - 1);
      if (next >= 0 && next < phases.length) {
        phases[next].focus();
        phases[next].scrollIntoView({ block: "start" });
        event.preventDefault();
      }
    } else if (event.key === "o") {
      var all = document.querySelectorAll("details.attempt");
      var anyClosed = Array.prototype.some.call(all, function (d) { return !d.open; });
      all.forEach(function (d) { d.open = anyClosed; });
      event.preventDefault();
    }
  });

  // Printed (or saved as PDF) with every attempt open.
  var closedForPrint = [];
  window.addEventListener("beforeprint", function () {
    closedForPrint = [];
    document.querySelectorAll("details").forEach(function (d) {
      if (!d.open) { closedForPrint.push(d); d.open = true; }
    });
  });
  window.addEventListener("afterprint", function () {
    closedForPrint.forEach(function (d) { d.open = false; });
    closedForPrint = [];
  });
}());
