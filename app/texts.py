"""Short classroom explanations shown beside each panel (Markdown). The page's one h1 is the app's title
(layout.py); each tab's title here is an h2."""

INTRO = """
## Speculative decoding, one iteration at a time
A small, fast **draft** proposes a few tokens; the big **target** checks all of them in **one** forward pass,
keeps the longest prefix it agrees with, and adds one token of its own. The output has exactly the
target's distribution (**lossless means same distribution, not same text**). Press **Run** to watch,
**Step** to go one iteration at a time, or drag the **timeline** to revisit any iteration.
An example run is already loaded below, before any model has been loaded.
"""

CHIPS = """
**The text so far.** Each chip is one token. Hover (or tap) a chip to see **p(x)** — the target's
probability — **q(x)** — the draft's probability — the **coin u** ~ U(0, 1) and the **threshold**
min(1, p(x) / (l·q(x))) it was compared with: a draft token is accepted when u ≤ threshold.
Spaces show as `·`, newlines as `↵`. The chips of the selected iteration are outlined.
A small `↺` marks a draft token copied from the context (prompt lookup, the hybrid), a small `❞` one
copied from the target's own earlier answers (the hybrid with a corpus). Special tokens of the chat
template, which mark where a turn starts or ends, show as a labelled marker such as ⟨end of turn⟩.
"""

DRAFT_ROW = """
**This iteration's draft.** The draft proposed γ tokens. Left to right, the target accepts each one
with probability min(1, p/q): the grey region of each bar is that probability, the black tick is the
coin u. The first tick that lands outside the grey region is a rejection; everything after it is
thrown away. **Accepted length** counts accepted *draft* tokens; **tokens per target call** adds the
one correction or bonus token every iteration produces.
"""

PQ = """
**p vs q at one draft position.** Blue is the target p, orange (hatched) is the draft q; the outlined
bars are the drafted token. Where q > p the draft is over-confident and the token is sometimes
rejected; where p ≥ q it is always accepted. The overlap Σ min(p, q) is the chance of acceptance, α.
"""

RESIDUAL = """
**The residual.** After a rejection the correction token is drawn from norm(max(0, p − q)): the
probability mass the draft *under*-proposed. Accepting from q and correcting from this residual
gives back exactly p — that is the whole trick.
"""

TREE = """
**The draft tree.** Plain speculative decoding drafts a chain (one path); beam and tree methods
draft several branches and verify them together. The accepted path is highlighted in green.
In a PPD tree, blue nodes (solid border) are candidates the target checks now, and the purple rows
(dotted border) under a node are its prompt tokens: guesses for a *later* step, not checked yet.
In a tree of the draft model's guesses, the children of a kept token are tried in order (1st try,
2nd try, …): each shows q and p, its coin u against min(1, p/q), and ✓ kept, ✗ rejected or — not
tried (faded); under a rejected one, the residual it leaves is what the next sibling is tested against.
"""

RUNNING = """
**Running charts.** Cumulative tokens/s (dashed: the autoregressive baseline, when measured in
this session, e.g. in the race tab), the accepted length of every iteration, and energy
per token when a meter is available — otherwise the reason, plus a labelled proxy (bytes of weights
read per token), which is *not* a measurement.

Below them, two charts of the whole run so far. **Acceptance per draft position**: for each position
i, of the iterations that drafted at least i tokens, the share whose first i draft tokens were all
accepted. The dashed line is α<sup>i</sup> (α to the power i): what you would see if every draft
token were accepted on its own with the same chance α (the mean overlap Σ min(p, q), as in the
theory panel). Real drafts depart
from it: a copied passage that starts to match tends to go on matching, so its later positions beat
α<sup>i</sup>, and that is what tells you how long a draft is worth making. **Draft tokens accepted per
iteration**: how many iterations accepted 0, 1, 2, ... of their draft tokens; the *mean acceptance
length* is one more than their average, because the target always adds one token of its own.
"""

THEORY = """
**Theory (Leviathan et al., section 3).** With acceptance rate α and cost ratio c (one draft step /
one target step), one iteration yields on average (1 − α^(γ+1)) / (1 − α) tokens per target call,
and the walltime improvement is that divided by (γc + 1). α and c come from *this* run: α is the
mean overlap Σ min(p, q) over the drafted positions, c the measured draft time per draft call over the
verify time per target call. The theorem assumes verifying γ+1 tokens costs as much as one; on a
CPU it costs more, so measured speedups are lower.
"""

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

MENTORED = """
**Mentored decoding: lossy on purpose.** Strict speculative sampling accepts a drafted token x with
probability min(1, p(x)/q(x)), and its output is *exactly* the target p. Mentored decoding allows
the output of each step to differ from p by at most a bound **D**, measured as KL(p‖output), and
among all such rules picks the one that accepts the most: it trades a bounded KL for more
acceptance (longer accepted drafts, fewer target calls). Its acceptance r(x) is never below the
strict one. **D = 0 is exactly speculative sampling.**

*Top chart:* for each examined draft position, grey (hatched) = strict acceptance min(1, p/q) of the drafted
token, green = mentored acceptance r(x); the black tick is the coin u (accept iff u ≤ r(x)); the
italic label under each position says which rule decided (see the list under the table). *Bottom chart:* KL(p‖q) (what accepting
every draft would cost) vs KL(p‖output) of the mentored step, which always stays under the dashed bound D.
*Output chart:* at one position (pick it with "Draft position" above), the distribution one mentored
step outputs vs p and q: it leans from p towards q exactly as far as the bound allows.
"""

MJSD = """
**MJSD (multi-token joint speculative decoding): judge whole prefixes, not single tokens.** The draft
runs **B beams** for γ steps (beam search: the B most likely continuations by their joint draft
likelihood q(x₁..ⱼ) = q(x₁)·q(x₂|x₁)·…), and the best beam is the draft. The target scores it in one
pass, and a prefix x₁..xⱼ **passes when min(1, p(x₁..ⱼ)/q(x₁..ⱼ)) > τ**. The longest passing prefix
(length η) is kept, then the target draws one more token at position η + 1. MJSD is lossy: it does
not sample from p exactly; it keeps drafts the target finds *jointly* likely enough.

**Why every j is checked:** the joint ratio is a product of per-token ratios p(xᵢ)/q(xᵢ), so it can
dip below τ at one token and climb back above it when a later token is likelier under p than under
q. Unlike per-token speculative sampling, a failing prefix does not end the search: η is the
*largest* passing j, not the first failure. (Once p = 0 — a token outside the target's top-k/top-p —
the ratio stays 0 for every longer prefix.)

**τ** (the dashed line): lower keeps more; τ = 0 keeps every prefix the target gives a probability
above 0, τ = 1 keeps nothing (plain target decoding, one token per target call). **B**: more beams find
drafts with a higher joint q, at more draft compute (B = 1 is a single chain).
**Temperature 0** for MJSD: the beams are deterministic beam search, the joint likelihoods in the
ratio still use temperature 1 after top-k/top-p (argmax would make every likelihood 0 or 1), and
the extra token is the target's argmax. The beam tree is drawn below the table (and in the "Draft
tree" panel): each node's number is the joint log q of its prefix; the chosen beam has a thick outline.
"""

PPD = """
**Parallel prompt decoding (PPD): the target drafts for itself.** There is no draft model. PPD appends a few
**prompt tokens** after the text: small trained embedding vectors (m = 3 by default; they are all PPD
trains, the target stays frozen). In the same forward pass that gives the next token, prompt token 1 guesses the token
**2 ahead**, prompt token 2 the token **3 ahead**, and so on: several future tokens from one pass.

**A sparse tree of candidates.** The previous step's guesses become this step's **candidates**: the top few
guesses at each distance, arranged as a tree (a child continues its parent). Likelier candidates get more
children, and more prompt tokens of their own, hanging under them (dotted purple) to guess the next step's
candidates. The **tree size n** counts everything added to the pass: candidates + prompt-token inputs.

**Verification in that same pass.** The root, all candidates and all prompt tokens go through the target
**once**, with a *tree attention* mask: each node sees the committed text and its own ancestors only, so every
branch is scored as if it were alone. Then the target walks the tree from the root and keeps the longest
path it agrees with, plus one token of its own at the end (so every step yields at least one token):

* **Temperature 0, exact match:** a candidate is kept only if it is the target's own argmax there. The text is
  exactly the target's greedy output: **lossless**.
* **Temperature > 0, typical acceptance:** a candidate x is kept when p(x) > min(ε, δ·exp(−H(p))), i.e. the
  target finds it plausible enough (H is the entropy of p). Faster, but **lossy**: unlike speculative
  sampling, the text no longer follows the target's distribution exactly.

**Hardware-aware tree size.** A bigger tree gives more tokens per step, T(n), but each pass gets slower, L(n).
Tuning measures both on this device, and n* = argmax T(n)/L(n) becomes the tree size PPD uses by default; the
panel's chart shows the measurements once PPD has been tuned here.
"""


def bf16_exactness_sentence() -> str:
    """The one plain sentence on exactness in bfloat16, with the rate measured by the benchmark."""
    from .measured import greedy_equal_rate

    rate = greedy_equal_rate("bfloat16")
    measured = (f" (measured: greedy speculative text equalled greedy autoregressive text, all 64 tokens, on "
                f"{rate} prompts of the Spec-Bench subset)") if rate else ""
    return ("In bfloat16 the acceptance rule is exact with respect to the target as the verify pass evaluates it; "
            "that pass rounds differently from one-token passes, so greedy text can differ from bfloat16 "
            f"autoregressive decoding where two tokens are nearly tied{measured}. float32 is the reference "
            "precision: there greedy speculative text equals greedy autoregressive text.")


def greedy_texts_note(a, b) -> str:
    """Two greedy summaries of one prompt whose texts differ: why, in HTML (empty when they agree)."""
    greedy = all((s.settings or {}).get("sampling", {}).get("temperature") == 0 for s in (a, b))
    if not greedy or a.token_ids == b.token_ids:
        return ""
    dtypes = {(s.models or {}).get("dtype") for s in (a, b)}
    if dtypes == {"float32"}:
        return ('<p class="note"><b>The greedy texts differ in float32</b>, where lossless decoding must reproduce '
                "them token for token: this is a bug, please report it with the two traces.</p>")
    return f'<p class="note">The greedy texts differ. {bf16_exactness_sentence()}</p>'
