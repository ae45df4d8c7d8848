"""The Gradio app: layout and event wiring (`layout.py`), rendering of trace records into HTML
(`render.py`) and plotly figures (`charts.py`), per-session state, presets and limits
(`session.py`). Nothing here recomputes what the engine (`decoding/`) already put in a record.
"""
