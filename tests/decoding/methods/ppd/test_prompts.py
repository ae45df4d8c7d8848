"""PPD's prompt tokens (`decoding/methods/ppd/prompts.py`): where the embeddings came from, named by path."""


def test_embeddings_inside_the_repo_are_named_by_relative_path(tmp_path):
    """Traces and the tuning cache record the embeddings' source: repo files by repo-relative path."""
    from decoding.paths import PPD_ASSETS as ASSETS, display_path as _display_path
    from decoding.methods.ppd.prompts import PromptTokens

    assert _display_path(ASSETS / "m" / "prompt_tokens.pt") == "assets/ppd/m/prompt_tokens.pt"
    outside = tmp_path / "prompt_tokens.pt"
    PromptTokens(3, 1, 4, trained=True).save(outside)
    assert PromptTokens.load(outside).source == str(outside)
