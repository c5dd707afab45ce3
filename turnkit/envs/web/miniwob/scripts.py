"""The JavaScript that MiniWoB pages run for the env: seeding, episode start, observation, and action targets.

Every script is an expression evaluated with :meth:`turnkit.browser.Tab.evaluate`; the ``*_js`` functions
fill their arguments in with :func:`json.dumps`, so no text from an action can break out of a string.

* :data:`INIT_SCRIPT` runs before the page's own scripts in every document: it replaces ``Math.random`` by
  a xorshift generator seeded from the ``tkseed`` URL parameter, so that whatever a page draws before
  :func:`start_js` seeds MiniWoB's own ``Math.seedrandom`` is reproducible too.
* :func:`start_js` starts the episode like MiniWoB's Python driver (``Math.seedrandom(seed)`` then
  ``core.startEpisodeReal()``) and removes its wall-clock limit: the countdown display is turned off and the
  10-second end-of-episode timer is cleared (``core.EP_TIMER`` keeps a non-null placeholder, so
  ``core.endEpisode`` still records the reward). Turn limits replace the clock.
* :data:`OBSERVE_JS` lists the visible elements a policy can refer to (see :mod:`.observe`), reading MiniWoB's
  reward globals (``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``) in the same call. Refs are kept in a
  ``WeakMap`` (the DOM is not modified: several tasks compare ``innerHTML``) and are stable: an element keeps
  its number for the whole episode, new elements get new numbers.

Example:
    >>> import json
    >>> click_point_js(3).endswith("(3)")
    True
    >>> 'x"); alert(1); ("' in select_js(2, 'x"); alert(1); ("')  # arguments are JSON literals
    False
"""

from __future__ import annotations

import json

MAX_ITEMS = 150
"""Most elements listed in one observation (MiniWoB pages have far fewer)."""

MAX_TEXT = 200
"""Longest text shown for one element, in characters."""

INIT_SCRIPT = """(() => {
  const m = /[?&]tkseed=(\\d+)/.exec(location.search);
  let s = (m ? Number(m[1]) : 0) >>> 0;
  if (s === 0) s = 0x2545F491;
  Math.random = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
})();"""
"""Seeds ``Math.random`` from the URL before any page script runs."""


def start_js(seed: int) -> str:
    """Start MiniWoB's episode with ``seed`` and without its wall-clock limit; evaluates to ``WOB_TASK_READY``.

    Example:
        >>> "Math.seedrandom(7)" in start_js(7)
        True
    """
    return (
        "(() => { core.countdownTimer = function () {}; "
        f"Math.seedrandom({int(seed)}); core.startEpisodeReal(); "
        "if (core.EP_TIMER !== null) { clearTimeout(core.EP_TIMER); core.EP_TIMER = -1; } "
        "return WOB_TASK_READY !== false; })()"
    )


OBSERVE_JS = """(() => {
  const tk = window.__tk || (window.__tk = {refs: new WeakMap(), next: 1, byRef: new Map()});
  const SKIP_IDS = new Set(['reward-display', 'sync-task-cover', 'click-canvas', 'attention-canvas', 'query']);
  const SKIP_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'OPTION', 'OPTGROUP', 'BR', 'HEAD']);
  const CONTROLS = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA']);
  const WHOLE = new Set(['A', 'BUTTON', 'SELECT', 'TEXTAREA']);
  const clean = (t) => (t || '').replace(/\\s+/g, ' ').trim();
  const items = [];
  let truncated = false;
  tk.byRef = new Map();
  const refOf = (el) => {
    let r = tk.refs.get(el);
    if (r === undefined) { r = tk.next++; tk.refs.set(el, r); }
    tk.byRef.set(r, el);
    return r;
  };
  const walk = (el, depth) => {
    if (SKIP_IDS.has(el.id) || SKIP_TAGS.has(el.tagName)) return;
    if (el.tagName === 'INPUT' && el.type === 'hidden') return;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') return;
    const rect = el.getBoundingClientRect();
    const whole = WHOLE.has(el.tagName);
    let own = '';
    for (const c of el.childNodes) if (c.nodeType === 3) own += ' ' + c.data;
    const text = el.tagName === 'SELECT' || el.tagName === 'TEXTAREA' ? '' : clean(whole ? el.textContent : own);
    const clickable = el.hasAttribute('onclick') || el.hasAttribute('role') || el.hasAttribute('tabindex');
    let next = depth;
    if (rect.width > 0 && rect.height > 0 && (CONTROLS.has(el.tagName) || text || clickable)) {
      if (items.length >= MAX_ITEMS) { truncated = true; return; }
      const item = {ref: refOf(el), tag: el.tagName.toLowerCase(), depth: depth, text: text.slice(0, MAX_TEXT)};
      if (el.tagName === 'INPUT') {
        item.type = el.type;
        if (el.type === 'checkbox' || el.type === 'radio') item.checked = el.checked;
        else item.value = String(el.value).slice(0, MAX_TEXT);
        if (el.placeholder) item.placeholder = clean(el.placeholder).slice(0, MAX_TEXT);
      } else if (el.tagName === 'TEXTAREA') {
        item.value = String(el.value).slice(0, MAX_TEXT);
      } else if (el.tagName === 'SELECT') {
        item.options = Array.from(el.options).slice(0, MAX_ITEMS).map((o) => clean(o.textContent).slice(0, MAX_TEXT));
        item.selected = el.selectedIndex >= 0 ? clean(el.options[el.selectedIndex].textContent) : null;
      }
      if (document.activeElement === el && el !== document.body) item.focused = true;
      if (el.disabled) item.disabled = true;
      items.push(item);
      next = depth + 1;
    }
    if (whole) return;
    for (const c of el.children) walk(c, next);
  };
  if (document.body) walk(document.body, 0);
  const q = document.getElementById('query');
  return {
    utterance: q ? clean(q.textContent) : '',
    done: typeof WOB_DONE_GLOBAL !== 'undefined' && WOB_DONE_GLOBAL === true,
    raw_reward: typeof WOB_RAW_REWARD_GLOBAL === 'number' ? WOB_RAW_REWARD_GLOBAL : 0,
    items: items,
    truncated: truncated,
  };
})()""".replace("MAX_ITEMS", str(MAX_ITEMS)).replace("MAX_TEXT", str(MAX_TEXT))
"""Lists the page's visible elements and reads MiniWoB's reward globals (see the module docstring)."""

SETTLE_JS = "new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))"
"""Resolves after the next frame and the timers queued by an action's event handlers."""

_ELEMENT = """const el = window.__tk && window.__tk.byRef.get(ref);
  if (!el || !el.isConnected) return {error: 'gone'};"""


def click_point_js(ref: int) -> str:
    """Scroll element ``ref`` into view and return ``{x, y}``, a point where a click reaches it (or ``{error}``).

    The centre of its first box if nothing covers it there, else the first uncovered point of a 3 x 3 pattern
    over its boxes (a user clicks the visible part of a partly covered button); a fully covered element is
    clicked at its centre (``covered: true``), where whatever covers it gets the click.

    Example:
        >>> click_point_js(12).startswith("((ref) =>")
        True
    """
    return f"""((ref) => {{
  {_ELEMENT}
  el.scrollIntoView({{block: 'nearest', inline: 'nearest'}});
  const boxes = Array.from(el.getClientRects()).filter((r) => r.width > 0 && r.height > 0);
  if (!boxes.length) return {{error: 'hidden'}};
  const hits = (x, y) => {{
    const t = document.elementFromPoint(x, y);
    return t !== null && (t === el || el.contains(t));
  }};
  for (const r of boxes) {{
    for (const [fx, fy] of [[0.5, 0.5], [0.25, 0.5], [0.75, 0.5], [0.5, 0.25], [0.5, 0.75], [0.15, 0.15],
                            [0.85, 0.15], [0.15, 0.85], [0.85, 0.85]]) {{
      const x = r.left + r.width * fx, y = r.top + r.height * fy;
      if (hits(x, y)) return {{x: x, y: y}};
    }}
  }}
  const r = boxes[0];
  return {{x: r.left + r.width / 2, y: r.top + r.height / 2, covered: true}};
}})({json.dumps(int(ref))})"""


def focus_field_js(ref: int) -> str:
    """Focus text field ``ref`` and select its content (typing replaces it); ``{ok}`` or ``{error, tag}``.

    Example:
        >>> "el.focus()" in focus_field_js(1)
        True
    """
    return f"""((ref) => {{
  {_ELEMENT}
  const TEXT = ['text', 'password', 'email', 'number', 'search', 'tel', 'url'];
  const field = el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && TEXT.includes(el.type)) || el.isContentEditable;
  if (!field) return {{error: 'not a text field', tag: el.tagName.toLowerCase()}};
  if (el.disabled || el.readOnly) return {{error: 'disabled', tag: el.tagName.toLowerCase()}};
  el.focus();
  if (typeof el.select === 'function') el.select();
  return {{ok: true, focused: document.activeElement === el, empty: el.value === ''}};
}})({json.dumps(int(ref))})"""


def clear_field_js(ref: int) -> str:
    """Empty text field ``ref`` (``type[ref, ]``), firing ``input`` and ``change`` like a user's deletion."""
    return f"""((ref) => {{
  {_ELEMENT}
  if (!('value' in el)) return {{error: 'not a text field'}};
  el.value = '';
  el.dispatchEvent(new Event('input', {{bubbles: true}}));
  el.dispatchEvent(new Event('change', {{bubbles: true}}));
  return {{ok: true}};
}})({json.dumps(int(ref))})"""


def select_js(ref: int, option: str) -> str:
    """Choose ``option`` (by its text, then case-insensitively, then by value) in list ``ref``.

    Evaluates to ``{ok, selected}`` or ``{error, options}``; fires ``input`` and ``change`` events.
    """
    return f"""((ref, want) => {{
  {_ELEMENT}
  if (el.tagName !== 'SELECT') return {{error: 'not a list', tag: el.tagName.toLowerCase()}};
  if (el.disabled) return {{error: 'disabled', tag: 'select'}};
  const clean = (t) => (t || '').replace(/\\s+/g, ' ').trim();
  const opts = Array.from(el.options);
  let i = opts.findIndex((o) => clean(o.textContent) === want);
  if (i < 0) i = opts.findIndex((o) => clean(o.textContent).toLowerCase() === want.toLowerCase());
  if (i < 0) i = opts.findIndex((o) => o.value === want);
  if (i < 0) return {{error: 'no such option', options: opts.slice(0, 20).map((o) => clean(o.textContent))}};
  el.focus();
  el.selectedIndex = i;
  el.dispatchEvent(new Event('input', {{bubbles: true}}));
  el.dispatchEvent(new Event('change', {{bubbles: true}}));
  return {{ok: true, selected: clean(opts[i].textContent)}};
}})({json.dumps(int(ref))}, {json.dumps(option)})"""
