"""Projector mode for the whole page: one switch in the header that grows the type of every tab
(assets/projector.css: 24 px body text, chips, tables, the player, the charts' text) for the back of a
classroom. It is a class on the page's <body>, so it holds on every tab; it is remembered in the
browser (localStorage) and in the address (`?projector=1`), so a copied link opens in projector mode.
"""

from __future__ import annotations

from decoding.paths import ASSETS

PROJECTOR_CSS = ASSETS / "projector.css"

# the switch changed (by the user, or on load): the class, the address and the browser's memory follow.
# The charts: plotly.js lays a chart out for its type sizes, so each chart is relaid out with larger type
# (global font, title, legend, annotations), checked every second while the mode is on, because the app
# draws its charts anew on every update; where plotly.js is not reachable, a CSS rule enlarges the text.
TOGGLE_JS = """(on) => {
  on = !!on;
  document.body.classList.toggle('projector', on);
  try { localStorage.setItem('specdec-projector', on ? '1' : '0'); } catch (e) {}
  try {
    const url = new URL(window.location.href);
    if (on) url.searchParams.set('projector', '1'); else url.searchParams.delete('projector');
    history.replaceState(history.state, '', url);
  } catch (e) {}
  const BIG = 18, SMALL = 12;
  const fit = () => {
    const P = window.Plotly;  // plotly.js loads with the first chart, maybe after this runs
    const want = document.body.classList.contains('projector');
    document.body.classList.toggle('projector-css-plots', want && !(P && P.relayout));
    if (!(P && P.relayout)) return;
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (!gd.layout || gd.offsetParent === null) continue;
      const size = (gd.layout.font && gd.layout.font.size) || SMALL;
      if (want === (size >= BIG)) continue;
      const s = want ? BIG : SMALL;
      const update = {'font.size': s, 'title.font.size': want ? BIG + 2 : SMALL,
                      'legend.font.size': want ? BIG - 2 : 11};
      (gd.layout.annotations || []).forEach((a, i) => { update[`annotations[${i}].font.size`] = want ? BIG - 2 : 11; });
      // the title sits below the chart's label (which covers the chart's top left): lower it and the plot with
      // it, and make the chart taller so that its plot keeps its room beside the larger type
      const t = gd.layout.title, h = gd.layout.height || 300;
      if (want) {
        gd.__specdecOrig = {y: t && t.y, top: (gd.layout.margin || {}).t, height: gd.layout.height};
        update['height'] = Math.round(h * 1.4);
        if (t && t.yref === 'container' && typeof t.y === 'number') {
          update['title.y'] = 1 - ((1 - t.y) * h + 48) / (h * 1.4);  // below the label's two lines of larger type
        }
        if (typeof gd.__specdecOrig.top === 'number') update['margin.t'] = gd.__specdecOrig.top + 54;
      } else if (gd.__specdecOrig) {
        const o = gd.__specdecOrig;
        if (typeof o.y === 'number') update['title.y'] = o.y;
        if (typeof o.top === 'number') update['margin.t'] = o.top;
        if (typeof o.height === 'number') update['height'] = o.height;
        gd.__specdecOrig = null;
      }
      try { P.relayout(gd, update); } catch (e) {}
    }
  };
  clearInterval(window.__specdecProjectorTimer);
  fit();
  if (on) window.__specdecProjectorTimer = setInterval(fit, 1000);
  setTimeout(() => window.dispatchEvent(new Event('resize')), 50);
}"""

# on load: ?projector=1 (or 0) in the address wins, else what this browser chose last time
LOAD_JS = """() => {
  const q = new URL(window.location.href).searchParams.get('projector');
  if (q !== null) return q === '1' || q === 'true' || q === 'on';
  try { return localStorage.getItem('specdec-projector') === '1'; } catch (e) { return false; }
}"""


def projector_css() -> str:
    return PROJECTOR_CSS.read_text(encoding="utf-8") if PROJECTOR_CSS.exists() else ""
