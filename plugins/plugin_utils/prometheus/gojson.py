# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON as Go's encoding/json writes it: the KV's ``maand/prometheus`` values (``scrape/<job>``,
``scrape_configs``). No Ansible imports.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import PrometheusError
from .goyaml import go_atom, go_float_text, shortest


# --- JSON as Go's encoding/json writes it (the KV's scrape/<job> and scrape_configs) ------------

def go_json(value: Any) -> str:
    """json.Marshal: compact, keys sorted, <, >, & and U+2028/2029 escaped, floats as Go writes them."""
    if isinstance(value, dict):
        return "{" + ",".join(go_json(str(k)) + ":" + go_json(value[k]) for k in sorted(value, key=str)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    atom = go_atom(value)
    if atom is not None:
        return atom
    if isinstance(value, float):
        return _go_json_float(value)
    text = json.dumps(str(value), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _go_json_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise PrometheusError("json: unsupported value: %s" % go_float_text(value))
    digits, point = shortest(value)
    exp = point - 1
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = "%se%s%d" % (mantissa, "-" if exp < 0 else "+", abs(exp))
    elif point <= 0:
        text = "0." + "0" * (-point) + digits if digits != "0" else "0"
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if value < 0 else "") + text
