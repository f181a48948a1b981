"""The scripts `fill_form` runs in the form's document, in a world of the
worker's own (plugins/form_typing.py drives them and says why each value is
inserted by one of them, after its checks, rather than typed as keys)."""

from __future__ import annotations

# Elements that hold another document: what is focused in one is that
# document's, so no value is ever typed into one.
HOLDERS = ["iframe", "frame", "object", "embed", "fencedframe", "portal"]

# Each script answers a word the Python side turns into the sentence; one
# that finds an element answers it by reference.
FRAME_JS = """function (selector) {
  let frame;
  try { frame = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!frame) return "missing";
  return ["iframe", "frame"].includes(frame.localName) ? frame : "not an iframe";
}"""
ORIGIN_JS = "function () { return self.origin; }"
# A navigation that would replace the document (same-document ones, a
# fragment or `history.pushState`, keep it) marks the watch, at its start.
WATCH_JS = """function () {
  const watch = {left: null};
  if (self.navigation) {
    navigation.addEventListener("navigate", (event) => {
      if (event.destination.sameDocument) return;
      let to = "another document";
      try { to = new URL(event.destination.url).origin; } catch (error) {}
      watch.left = watch.left || to;
    });
  }
  return watch;
}"""
FOCUS_JS = """function (selector, holders) {
  let field;
  try { field = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!field) return "missing";
  if (holders.includes(field.localName)) return "holder:" + field.localName;
  field.focus();
  if (typeof field.select === "function") field.select();
  return document.activeElement === field ? field : "not focusable";
}"""
# Called on the field: every check and the insertion in one step of the
# document's, so nothing of the page's runs between them.
TYPE_JS = """function (text, origin, watch) {
  if (watch.left !== null) return "left:" + watch.left;
  if (self.origin !== origin) return "origin:" + self.origin;
  if (this.ownerDocument !== document || document.activeElement !== this) return "moved";
  return document.execCommand("insertText", false, text) ? "typed" : "takes no text";
}"""
CLICK_JS = """function (selector) {
  let button;
  try { button = document.querySelector(selector); } catch (error) { return "not a CSS selector"; }
  if (!button) return "missing";
  button.click();
  return "clicked";
}"""
EMPTY_JS = """function (selectors) {
  for (const selector of selectors) {
    let field = null;
    try { field = document.querySelector(selector); } catch (error) {}
    if (field && "value" in field) field.value = "";
  }
}"""
