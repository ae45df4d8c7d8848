"""A method's settings (`decoding/methods/settings.py`): ranges checked, older names read."""

import pytest

from decoding.methods.mentored import MentoredSettings
from decoding.methods.mjsd.generator import MjsdSettings
from decoding.methods.ppd.generator import PPDSettings


def test_settings_check_ranges_and_read_older_names():
    assert PPDSettings.from_dict({"tree_budget": 16}).tree_size == 16  # the app's (and old traces') name
    assert PPDSettings.from_dict({"tree_size": "8"}).tree_size == 8
    for data, pattern in [({"beams": 0}, "beams"), ({"beams": 2.5}, "whole number"), ({"tau": 1.5}, "tau"),
                          ({"tau": "x"}, "tau")]:
        with pytest.raises(ValueError, match=pattern):
            MjsdSettings.from_dict(data)
    with pytest.raises(ValueError, match="KL bound"):
        MentoredSettings.from_dict({"kl_bound": -1})
    with pytest.raises(ValueError, match="gamma schedule"):
        MentoredSettings.from_dict({"gamma_schedule": "sometimes"})
