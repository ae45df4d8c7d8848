"""The `Drafter` interface (`decoding/drafters/base.py`): every drafter class in the engine implements
each member in its own class body (found from the source, not from a list), every drafter the pair
loader builds is one, nothing in decoding/ or app/ probes a drafter with hasattr/getattr, the
explicit no-ops change nothing, and `stop_after` is honoured by every drafter, copies included."""

import ast
import copy
import importlib
from pathlib import Path

import pytest
import torch

from decoding.drafters.base import Drafter, Proposal, cut_where_told
from decoding.drafters.corpus import TextCorpus
from decoding.drafters.hybrid import HybridDrafter
from decoding.drafters.lookup import PromptLookupDrafter
from decoding.drafters.model import ModelDrafter
from decoding.lm.cached_lm import CachedLM
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import Draft, load_draft_value
from decoding.trace.source import DraftSource

from _siblings import load_test_module

ROOT = Path(__file__).resolve().parents[3]
GREEDY = SamplingConfig(temperature=0.0)
MEMBERS = sorted(Drafter.__abstractmethods__)  # vocab_width, calls, attach_target, sources, propose, rollback
ScriptedModel = load_test_module("decoding/drafters/test_hybrid.py").ScriptedModel


def _source_files(*packages: str):
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def engine_drafter_classes() -> list[type]:
    """Every class in decoding/ that drafts (its body defines `propose`) or names Drafter as its
    base, read from the source and then imported."""
    found = []
    for path in _source_files("decoding"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name == "Drafter":
                continue
            defines = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            bases = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
            if "propose" in defines or "Drafter" in bases:
                found.append(getattr(importlib.import_module(_module_name(path)), node.name))
    return found


def test_the_engine_has_the_four_drafters_it_builds():
    # guards the finder itself: were it to find nothing, the next test would pass on nothing
    names = {cls.__name__ for cls in engine_drafter_classes()}
    assert {"ModelDrafter", "PromptLookupDrafter", "FeatureDrafter", "HybridDrafter"} <= names


@pytest.mark.parametrize("cls", engine_drafter_classes(), ids=lambda cls: cls.__name__)
def test_every_drafter_class_implements_every_member_itself(cls):
    assert issubclass(cls, Drafter)
    assert not getattr(cls, "__abstractmethods__", None), f"{cls.__name__} leaves out {cls.__abstractmethods__}"
    missing = [m for m in MEMBERS if m not in vars(cls)]
    assert not missing, f"{cls.__name__} inherits {missing} instead of saying what it does"


def test_a_drafter_that_leaves_a_member_out_cannot_be_made():
    class Forgetful(Drafter):
        name = "forgetful"
        vocab_width = 4
        calls = 0

        def sources(self, sequence):
            return []

        def propose(self, sequence, gamma, sampling, generator, keep_going=None, source=None, exact=False,
                    stop_after=None):
            return Proposal([], torch.empty(0, 4))

        def attach_target(self, lm):
            pass

    with pytest.raises(TypeError, match="rollback"):
        Forgetful()


@pytest.fixture(scope="module")
def built(tiny_pair, tiny_feature_dir):
    """{label: a fresh drafter} for every kind of draft the pair loader makes for the tiny target."""
    target, draft = tiny_pair
    feature = load_draft_value(str(tiny_feature_dir), target, "float32")
    corpus = TextCorpus([target.encode_prompt("the cat sat on the mat", chat=False)])
    drafts = {"prompt-lookup": Draft.prompt_lookup(), "model": Draft.of_model(draft),
              "hybrid": Draft.of_model(draft).hybrid(), "hybrid+corpus": Draft.of_model(draft).hybrid(corpus),
              "feature": feature, "hybrid+feature": feature.hybrid()}
    return {label: d.drafter(target) for label, d in drafts.items()}


def test_every_drafter_the_loader_builds_is_a_drafter(built, tiny_pair):
    classes = set(engine_drafter_classes())
    target, _ = tiny_pair
    sequence = target.encode_prompt("the cat sat on the mat, the cat sat", chat=False)
    for label, drafter in built.items():
        assert isinstance(drafter, Drafter) and type(drafter) in classes, label
        assert isinstance(drafter.name, str) and drafter.name, label
        assert 0 < drafter.vocab_width <= target.vocab_size and drafter.calls == 0, label
        lm = CachedLM(target.model, target.device, min(target.vocab_size, drafter.vocab_width))
        drafter.attach_target(lm)
        lm.extend(sequence[:-1])  # the target has read the context (a feature draft drafts from it)
        sources = drafter.sources(sequence)
        assert sources and all(isinstance(s, DraftSource) for s in sources), label
        proposal = drafter.propose(sequence, 3, GREEDY, torch.Generator().manual_seed(0))
        assert proposal.tokens and proposal.q_rows.shape == (len(proposal.tokens), drafter.vocab_width), label
        drafter.rollback(len(sequence))


def _state(obj) -> dict:
    """Its attributes: tensors and containers copied, every other value as it is (compared by identity)."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else copy.copy(v) if isinstance(v, (list, dict, set)) else v
            for k, v in vars(obj).items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] is b[k] or a[k] == b[k] for k in a)


def test_the_no_ops_change_nothing(built, tiny_pair):
    target, _ = tiny_pair
    sequence = target.encode_prompt("the cat sat on the mat, the cat sat", chat=False)
    lookup, model = built["prompt-lookup"], built["model"]
    for drafter in (lookup, model):  # neither reads the target: attaching it changes neither side
        lm = CachedLM(target.model, target.device, target.vocab_size)
        mine, theirs = _state(drafter), _state(lm)
        drafter.attach_target(lm)
        assert _same(_state(drafter), mine) and _same(_state(lm), theirs) and lm.features is None
    # lookup keeps no cache and makes no calls: a rollback changes nothing, proposals repeat
    first = lookup.propose(sequence, 4, GREEDY, None)
    before = _state(lookup)
    lookup.rollback(3)
    assert _same(_state(lookup), before) and lookup.calls == 0
    again = lookup.propose(sequence, 4, GREEDY, None)
    assert again.tokens == first.tokens and torch.equal(again.q_rows, first.q_rows)


def test_the_hybrid_hands_the_target_to_a_feature_draft_and_to_nothing_else(built, tiny_pair):
    target, _ = tiny_pair
    lm = CachedLM(target.model, target.device, target.vocab_size)
    built["hybrid+feature"].attach_target(lm)
    assert built["hybrid+feature"].model.target is lm and lm.features is not None
    plain = CachedLM(target.model, target.device, target.vocab_size)
    built["hybrid"].attach_target(plain)
    assert plain.features is None


def test_a_copy_stops_where_told():
    #           0  1  2  3  4  5  6  7 | "1 2" repeats: lookup copies 3 4 5 6 ...
    sequence = [1, 2, 3, 4, 5, 6, 1, 2]
    lookup = PromptLookupDrafter(12, torch.device("cpu"))
    asked = []

    def stop_at_5(tokens):
        asked.append(list(tokens))
        return tokens[-1] == 5

    assert lookup.propose(sequence, 4, GREEDY, None).tokens == [3, 4, 5, 6]
    cut = lookup.propose(sequence, 4, GREEDY, None, stop_after=stop_at_5)
    assert cut.tokens == [3, 4, 5] and cut.q_rows.shape == (3, 12)
    assert asked == [[3], [3, 4], [3, 4, 5]]  # after each token, never after the last
    hybrid = HybridDrafter(ScriptedModel([7, 7, 7, 7], 12), 12, torch.device("cpu"), min_match=2)
    assert hybrid.propose(sequence, 4, GREEDY, None).tokens == [3, 4, 5, 6, 1, 2]  # a copy runs past gamma
    assert hybrid.propose(sequence, 4, GREEDY, None, stop_after=stop_at_5).tokens == [3, 4, 5]
    assert cut_where_told(cut, None) is cut


def test_a_hybrid_model_draft_and_its_copy_stop_where_told():
    sequence = [1, 2, 3, 4, 5, 9, 8]  # the model drafts 2, 3: "2 3" repeats, so 4 5 9 8 is copied after it
    hybrid = HybridDrafter(ScriptedModel([2, 3, 7, 7], 12), 12, torch.device("cpu"), min_match=2, lookup_tokens=4)
    asked = []

    def stop_when(last):
        def stop(tokens):
            asked.append(len(tokens))
            return tokens[-1] == last
        return stop

    assert hybrid.propose(sequence, 4, GREEDY, None, stop_after=stop_when(-1)).tokens == [2, 3, 4, 5, 9, 8]
    assert asked == [1, 2, 3, 4, 5]  # each prefix once, never after the last token
    stopped = hybrid.propose(sequence, 4, GREEDY, None, stop_after=stop_when(2))
    assert stopped.tokens == [2] and stopped.copied == 0  # the model stopped: no copy follows
    p = hybrid.propose(sequence, 4, GREEDY, None, stop_after=stop_when(5))
    assert p.tokens == [2, 3, 4, 5] and p.copied == 2 and p.source_of(3) == "lookup"


def test_the_model_drafter_stops_where_told(tiny_pair):
    target, draft = tiny_pair
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    seq = target.encode_prompt("hello world", chat=False)
    full = drafter.propose(seq, 5, GREEDY, None)
    drafter.rollback(len(seq) - 1)  # the next proposal feeds the last prompt token again
    calls = drafter.calls
    cut = drafter.propose(seq, 5, GREEDY, None, stop_after=lambda tokens: len(tokens) == 2)
    assert cut.tokens == full.tokens[:2] and drafter.calls == calls + 2  # no pass for a third token


# ---- no probing: the loop and the app use the interface, never hasattr/getattr on a drafter ------------

PROBES = ("hasattr", "getattr")
DRAFTER_ONLY = set(MEMBERS) | {"stop_after", "keep_going"}  # member names only a drafter has


def drafter_probes(source: str) -> list[str]:
    """hasattr/getattr calls on something named a drafter or asking for a member only drafters have."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES
                and node.args):
            continue
        subject = ast.unparse(node.args[0])
        member = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
        if "drafter" in subject.lower() or member in DRAFTER_ONLY:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_probe_finder_finds_the_probes_it_replaced():
    assert drafter_probes('if hasattr(self.model, "attach_target"):\n    pass')
    assert drafter_probes('w = getattr(drafter, "vocab_width", None) or drafter.lm.vocab_width')
    assert drafter_probes("n = getattr(self.drafter, name)")
    assert not drafter_probes('path = getattr(file, "name", None)')


@pytest.mark.parametrize("path", list(_source_files("decoding", "app")), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_probes_a_drafter(path):
    assert not drafter_probes(path.read_text(encoding="utf-8"))
