"""One conformance class per registered method (see ``tests/method_conformance.py``)."""

from __future__ import annotations

from method_conformance import MethodConformance

from pal_opt.methods import method_names

for _name in method_names():
    _cls = type(f"TestMethod_{_name.replace('-', '_')}", (MethodConformance,), {"method": _name})
    globals()[_cls.__name__] = _cls
