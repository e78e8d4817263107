// The animation player of convviz.viz.save(..., "x.html") and to_html(): frames as <img>
// elements, buttons, a slider and keys.  convviz/viz/_save.py fills in the two numbers
// marked /*INTERVAL*/ and /*HOLD*/ (milliseconds) and inlines this file in the page.
(function () {
  "use strict";
  var INTERVAL = /*INTERVAL*/250, HOLD = /*HOLD*/2000;
  var frames = document.querySelectorAll("#frames img"), n = frames.length;
  var slider = document.getElementById("slider"), readout = document.getElementById("readout");
  var playButton = document.getElementById("play");
  var current = 0, timer = null;
  function show(k) {
    k = Math.max(0, Math.min(n - 1, k));
    frames[current].hidden = true;
    frames[k].hidden = false;
    current = k;
    slider.value = String(k + 1);
    slider.setAttribute("aria-valuetext", "frame " + (k + 1) + " of " + n);
    readout.textContent = "frame " + (k + 1) + " / " + n;
  }
  function label(playing) {
    var words = playing ? "pause" : "play";
    playButton.textContent = playing ? "\u2016" : "\u25b6\ufe0e";
    playButton.title = words;
    playButton.setAttribute("aria-label", words);
  }
  function delay() { return current === n - 1 ? HOLD : INTERVAL; }
  function tick() { show((current + 1) % n); timer = setTimeout(tick, delay()); }
  function play() {
    if (timer !== null || n < 2) { return; }
    if (current === n - 1) { show(0); }
    timer = setTimeout(tick, delay());
    label(true);
  }
  function pause() {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    label(false);
  }
  function toggle() { if (timer === null) { play(); } else { pause(); } }
  function go(k) { pause(); show(k); }
  document.getElementById("first").addEventListener("click", function () { go(0); });
  document.getElementById("back").addEventListener("click", function () { go(current - 1); });
  document.getElementById("step").addEventListener("click", function () { go(current + 1); });
  document.getElementById("last").addEventListener("click", function () { go(n - 1); });
  playButton.addEventListener("click", toggle);
  slider.addEventListener("input", function () { go(Number(slider.value) - 1); });
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    var target = event.target, tag = target && target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target !== slider) ||
        (target && target.isContentEditable)) { return; }
    if (event.key === " " || event.key === "Spacebar") {
      if (tag === "BUTTON") { return; }  // the focused button clicks itself
      event.preventDefault(); toggle(); return;
    }
    if (target === slider) { return; }  // the slider moves itself with arrows, Home and End
    var moves = { ArrowRight: current + 1, ArrowLeft: current - 1, Home: 0, End: n - 1 };
    if (event.key in moves) { event.preventDefault(); go(moves[event.key]); }
  });
  show(0);
  var reduce = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  if (!reduce) { play(); }
})();
