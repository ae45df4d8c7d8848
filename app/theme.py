"""The app's Gradio theme: Gradio's default with the colours that failed WCAG 2.1 AA contrast darkened.

Gradio's default draws secondary text (slider ends, placeholders, info lines) in zinc-400 #bbbbc2,
1.9:1 on white, and white text on its orange-500 primary buttons #f97316, 2.8:1. Text needs 4.5:1
and UI parts 3:1 (WCAG 2.1 AA, 1.4.3 and 1.4.11), so here secondary text is zinc-500 #71717a (4.8:1),
primary and stop buttons carry white on orange-700 #c2410c (5.2:1) and red-700 #b91c1c (6.5:1), and
the slider's track is orange-600 #ea580c (3.6:1). `launch_kwargs` in layout.py passes the theme to
`launch`, where Gradio 6 takes it.
"""

from __future__ import annotations

import gradio as gr


def app_theme() -> gr.themes.Base:
    return gr.themes.Default().set(
        body_text_color_subdued="*neutral_500",
        input_placeholder_color="*neutral_500",
        block_info_text_color="*neutral_500",
        button_primary_background_fill="*primary_700",
        button_primary_background_fill_dark="*primary_700",
        button_primary_background_fill_hover="*primary_800",
        button_primary_background_fill_hover_dark="*primary_800",
        button_primary_border_color="*primary_700",
        button_primary_border_color_dark="*primary_700",
        button_primary_text_color="white",
        button_primary_text_color_dark="white",
        button_cancel_background_fill="#b91c1c",
        button_cancel_background_fill_dark="#b91c1c",
        button_cancel_background_fill_hover="#991b1b",
        button_cancel_background_fill_hover_dark="#991b1b",
        button_cancel_border_color="#b91c1c",
        button_cancel_border_color_dark="#b91c1c",
        button_cancel_text_color="white",
        button_cancel_text_color_dark="white",
        slider_color="*primary_600",
        slider_color_dark="*primary_600",
    )
