"""The Gradio app. Numbers shown are read off the trace records; run statistics (tokens per call,
alpha, c, ...) come from `decoding.trace.metrics`, the engine's definitions.

One package per tab, each with a `build` that lays the tab out and wires its events:

    lesson/       the Lesson: chapters from assets/lesson.yaml (and its languages' words), their widgets,
                  "Run it live"
    explainer/    the Explainer: one run iteration by iteration (handlers, the view, the method panel,
                  the player's data)
    lab/          the Exactness lab: one step sampled N times
    race/         the Race: two lanes replayed together, the plain comparison table, lane text checks
    layout.py     the page: the tabs in order, and what joins them (Stop, the lesson's links)

Shared by the tabs, at this root:

    session.py, packed.py, footprint.py   a user's state (gr.State), records kept packed, their bytes
    live.py, presets.py, controls.py      a live run on the loaded pair, the model pairs, the method controls
    settings.py                           a run's settings, their limits, the CLI command
    render.py, render_methods.py          trace records -> HTML (chips, draft row, tree, the methods' tables)
    render_tree.py                        a verified draft tree: each sibling's q, p, coin, residual; the kept path
    charts.py, charts_methods.py          trace records -> plotly figures (charts_running.py: the running
                                          charts, acceptance per draft position among them)
    rules_text.py, html_text.py, texts.py the rules' words, HTML escaping and numbers, the tabs' texts
    player.py                             the browser player (a gr.HTML component with its JavaScript)
    race_file.py, race_result.py, race_run.py   a race's file, figures and recording (the lesson and
                                          ZeroGPU use them too)
    gallery.py, measured.py               the task gallery, figures measured for the texts
    errors.py                             the error boundary: every failure in its event's status line
    capacity.py, zerogpu.py               model slots, threads and the queue; ZeroGPU Spaces
    theme.py                              the colours
    iterations.py                         which iteration and draft position a view shows
    i18n/, i18n_errors.py, preset_labels.py   the page's language: catalogs (assets/i18n/), the menu and
                                          re-rendering (i18n/ui.py), engine errors and pair names in it
    export/, export_menu.py, share.py, links.py   figures for slides (SVG, PNG), links that reproduce a
                                          run or a race, the tabs' export menus and link handlers
    projector.py                          projector mode for every tab (assets/projector.css)

Root modules (but layout.py, which composes the tabs) never import a tab package; the Lesson imports
from the Explainer and the Race tab; the Explainer and the lab hand the views the figures redraw to
`export.panels.use_views` when imported.
"""
