"""The Gradio app: tabs and event wiring (`layout.py`), handlers (`handlers.py`, `lab_events.py`,
`race.py` and `compare.py`), a session's live run (`live.py`), and the views that turn trace records into HTML
(`render*.py`) and plotly figures (`charts*.py`). Numbers shown are read off the records; run
statistics (tokens per call, alpha, c, ...) come from `decoding.trace.metrics`, the engine's definitions.
"""
