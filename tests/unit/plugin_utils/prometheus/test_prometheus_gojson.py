"""JSON as Go's encoding/json writes it (plugins/plugin_utils/prometheus/gojson.py)."""

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.prometheus import gojson as _gojson


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (0.5, "0.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
    (0.000001, "0.000001"), (-0.001, "-0.001"), (0.0, "0"),
])
def test_go_json_floats(value, text):
    assert _gojson.go_json(value) == text


def test_go_json_is_compact_sorted_and_html_escaped():
    assert _gojson.go_json([{"b": [1, None, True], "a": "<x>&"}]) == '[{"a":"\\u003cx\\u003e\\u0026","b":[1,null,true]}]'
