"""Short classroom explanations shown beside each panel (Markdown). The page's one h1 is the app's title
(layout.py); each tab's title here is an h2. The Explainer's texts are in the catalogs
(assets/i18n/<lang>/explainer.yaml, keys explainer.text.*), as are the two sentences below."""

from .i18n import t


LAB = """
## Exactness lab: lossless means same distribution, not same text
Edit the vocabulary, the target **p** and the draft **q** (each column must sum to 1). Each step
draws x ~ q, accepts it when u ≤ min(1, p(x)/(l·q(x))), and otherwise draws from the residual.
The histogram of N outputs converges to the **expected** distribution, which is exactly **p** when
lenience l = 1. With l < 1 more drafts are accepted and no token can exceed its cap p/l (black ticks).
Starting values: the worked example of the tutorial *Accelerating LLM Inference - Speculative Decoding*:
the draft proposes "is" more often than the target would write it.
The **Implementation** menu swaps the rule for mistakes that shipped or were proposed in public: some
drift away from p however large N gets (fast but wrong), one stays exactly p but keeps fewer drafts
(exact but slower). The larger example (47 tokens) shows the one that needs more than 20 tokens.
"""

SIDE = """
**Plain comparison table.** Runs two methods on the same prompt, seed and models, **one after the
other** (so they do not slow each other down), with lean traces for fair timing, and tabulates their
measured figures. With the same seed the two texts usually differ when sampling: both come from the
target's distribution, not from the same random draws. On a CPU with a tiny model, speculative
decoding can be **slower** than plain decoding — the table says so when it is.
"""

RACE = """
## The race: does speculative decoding buy time here?
Two methods decode the same prompt with the same seed, models and precision: **lane A** (speculative
decoding, with the drafter that suits the prompt) against **lane B** (plain autoregressive decoding).
Each is warmed up, then timed on its own, one after the other, so they never share the processor.
Then both replay together on **one clock**: every token appears at the moment it was produced.
Green chips were drafted and accepted, so a burst of green is one target call paying for several
tokens. Whether that wins depends on the prompt, the drafter and the machine: copying from the prompt
wins where the answer repeats it, a small draft model alone barely pays on a CPU, and in float32 on a
CPU speculative decoding often loses. The result says which. Slow motion and Replay run in your
browser, without the server.
"""


def bf16_exactness_sentence(lang: str | None = None) -> str:
    """The one plain sentence on exactness in bfloat16, with the rate measured by the benchmark."""
    from .measured import greedy_equal_rate

    rate = greedy_equal_rate("bfloat16")
    measured = t("explainer.bf16.measured", lang, rate=rate) if rate else ""
    return t("explainer.bf16.sentence", lang, measured=measured)


def greedy_texts_note(a, b, lang: str | None = None) -> str:
    """Two greedy summaries of one prompt whose texts differ: why, in HTML (empty when they agree)."""
    greedy = all((s.settings or {}).get("sampling", {}).get("temperature") == 0 for s in (a, b))
    if not greedy or a.token_ids == b.token_ids:
        return ""
    dtypes = {(s.models or {}).get("dtype") for s in (a, b)}
    if dtypes == {"float32"}:
        return f'<p class="note">{t("explainer.bf16.differ_float32", lang)}</p>'
    return f'<p class="note">{t("explainer.bf16.differ", lang)} {bf16_exactness_sentence(lang)}</p>'
