"""The page's one style sheet and its one small script (find as you type), both inline.

The find box filters the blocks (turns, messages, notices) to those whose text holds what
is typed, opening the folds that hold it; ``PAGE.html#find=TEXT`` opens the page so filtered.

The script only reads the page's text (``textContent``) and sets ``hidden`` and ``open``;
it never writes HTML. The page's Content-Security-Policy allows exactly these two by their
hashes (:func:`policy`) and nothing else: no other script, no style attribute, no image,
font, frame or connection, so even a mistake in escaping could neither run nor load.
"""

from __future__ import annotations

import base64
import hashlib

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2933; margin: 0; }
header.top { position: sticky; top: 0; background: #f0f4f8; border-bottom: 1px solid #d9e2ec;
  padding: 8px 20px; display: flex; gap: 12px; align-items: center; z-index: 1; }
header.top h1 { font-size: 16px; margin: 0; }
header.top input { font: inherit; padding: 3px 6px; width: 22em; }
main { padding: 0 20px 40px; max-width: 1100px; }
h2 { font-size: 19px; margin: 28px 0 6px; border-top: 2px solid #9fb3c8; padding-top: 10px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
h4 { font-size: 14px; margin: 0 0 4px; }
.meta, .usage { color: #52606d; font-size: 12px; margin: 2px 0; }
[hidden] { display: none !important; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px; }
th, td { border-bottom: 1px solid #d9e2ec; padding: 3px 6px; text-align: left;
  vertical-align: top; }
table.facts th { background: none; color: #52606d; font-weight: 500; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; padding: 6px 8px;
  background: #f7f9fb; border-left: 3px solid #d9e2ec; font: 12px/1.4 ui-monospace, monospace; }
pre.reasoning { color: #52606d; font-style: italic; }
pre.text { background: #fff; border-left-color: #4c78a8; font: 13px/1.45 system-ui, sans-serif; }
pre.obs { border-left-color: #54a24b; }
pre.obs.error { border-left-color: #e45756; }
pre.args { border-left-color: #72b7b2; }
.blk { margin: 10px 0; padding: 6px 0; border-bottom: 1px dashed #e4e7eb; }
.blk.turn h4 { color: #243b53; }
.blk.prompt .label { color: #8e44ad; font-weight: 600; }
.blk.notice p { margin: 2px 0; font-weight: 600; }
.error { color: #b42318; } .warn { color: #7b6d00; } .cancel { color: #7b6d00; }
.resume { color: #8e44ad; } .end { color: #2f7d32; }
.forked { color: #8e44ad; font-weight: 600; margin: 6px 0; }
.step { margin: 6px 0 6px 12px; }
.call { font-weight: 600; color: #0b6e79; margin: 4px 0 0; }
.arg .key { font-size: 12px; color: #52606d; }
.cut { color: #7b6d00; font-style: italic; }
details > summary { cursor: pointer; color: #52606d; }
details.inherited { border: 1px solid #d9e2ec; padding: 4px 8px; margin: 8px 0; }
pre.diff .add { color: #1a7f37; } pre.diff .del { color: #b42318; }
pre.diff .hunk { color: #6f42c1; } pre.diff .file { font-weight: 700; }
nav.index { overflow-x: auto; }
nav.index td, nav.index th { white-space: nowrap; }
.blk.notice p.kept { color: #7b6d00; font-weight: 400; }
.blk.summarized h4 { color: #8e44ad; }
pre.summary { border-left-color: #8e44ad; }
.masked { color: #7b6d00; font-style: italic; }
details.replaced { border: 1px solid #d9e2ec; padding: 4px 8px; margin: 8px 0; }
"""

SCRIPT = """
(function () {
  var box = document.getElementById("find");
  var said = document.getElementById("found");
  var blocks = Array.prototype.slice.call(document.querySelectorAll(".blk"));
  var texts = blocks.map(function (b) { return b.textContent.toLowerCase(); });
  function openAround(block, term) {
    for (var p = block.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
    block.querySelectorAll("details").forEach(function (d) {
      if (d.textContent.toLowerCase().indexOf(term) >= 0) { d.open = true; }
    });
  }
  function find() {
    var term = box.value.trim().toLowerCase();
    var hits = 0;
    blocks.forEach(function (block, i) {
      var hit = !term || texts[i].indexOf(term) >= 0;
      block.hidden = !hit;
      if (hit && term) { hits += 1; openAround(block, term); }
    });
    said.textContent = term ? hits + " of " + blocks.length + " blocks" : "";
  }
  box.addEventListener("input", find);
  var asked = /^#find=(.*)$/.exec(location.hash);
  if (asked) {
    try { box.value = decodeURIComponent(asked[1]); } catch (e) { box.value = asked[1]; }
    find();
  }
})();
"""


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def policy() -> str:
    """The page's Content-Security-Policy: its own style and script, nothing else."""
    return (
        f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
        "base-uri 'none'; form-action 'none'"
    )
