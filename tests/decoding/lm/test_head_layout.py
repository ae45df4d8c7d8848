"""The LM-head layout workaround (decoding/lm/models/head_layout.py): every loaded model's head gets
its input laid out afresh, and the logits do not change."""

import torch

from decoding.lm.models import head_layout


def test_the_head_sees_fresh_strides_and_the_logits_do_not_change(tiny_target_dir):
    from decoding.lm.models import load_model

    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    head = target.model.get_output_embeddings()
    seen = []
    head.register_forward_pre_hook(lambda module, args: seen.append((tuple(args[0].shape), args[0].stride())))
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.inference_mode():
        kept = target.model(input_ids=ids, logits_to_keep=2).logits
        full = target.model(input_ids=ids).logits
    assert seen[0] == ((1, 2, head.in_features), (2 * head.in_features, head.in_features, 1))
    assert torch.allclose(kept[0], full[0, -2:], atol=1e-6)
    head_layout.install(target.model)  # a second install adds no second hook
    assert sum(h is head_layout._fresh_layout for h in head._forward_pre_hooks.values()) == 1


def test_only_odd_strides_are_copied():
    x = torch.randn(1, 6, 4)
    assert head_layout._fresh_layout(None, (x,)) is None
    copied = head_layout._fresh_layout(None, (x[:, -1:, :],))[0]
    assert copied.stride() == (4, 4, 1) and torch.equal(copied, x[:, -1:, :])
