"""Compile every role's strict reply schema for the samples with real grammar engines.

Run by hand (not in CI):  python benchmarks/judge_schema_compile.py [--instances 20] [--llama-grammar FILE]

Engines, each used when it is installed:
- xgrammar (vLLM's structured-output engine; ``pip install xgrammar``): ``Grammar.from_json_schema``
  in strict mode, then a full compile against a byte-level vocabulary;
- llama.cpp's JSON-schema-to-grammar converter, as llama-cpp-python ships it
  (``llama_cpp.llama_grammar.json_schema_to_gbnf``; ``pip install llama-cpp-python``), or loaded
  from a copy of that file with ``--llama-grammar path/to/llama_grammar.py`` (it is pure Python,
  so a source download is enough: no C++ build).

For every request shape the sample benchmarks give rise to (``evalledger.testing.sample_requests``)
it prints whether each engine takes the schema, how long it took, and, where xgrammar can run
the grammar: how many arbitrary instances of the schema (``random_instance``) the grammar
accepts, and whether it rejects a reply missing a required property. llama.cpp's GBNF is run
through xgrammar's GBNF parser for that check.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import importlib.util
import json
import random
import sys
import time
from typing import Any

from evalledger.stages.judge.registry import role
from evalledger.testing.sample_requests import sample_files, sample_requests
from evalledger.testing.schema_instances import random_instance


def load_xgrammar():
    """The xgrammar module, or None."""
    try:
        import xgrammar
    except ImportError:
        return None
    return xgrammar


def load_llama_converter(path: str | None):
    """llama.cpp's json_schema_to_gbnf: from llama-cpp-python, else from ``path``; None when neither."""
    if path:
        spec = importlib.util.spec_from_file_location("llama_grammar_file", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module.json_schema_to_gbnf
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError:
        return None
    return json_schema_to_gbnf


def broken(instance: dict[str, Any]) -> dict[str, Any] | None:
    """``instance`` with one required property taken away (deepest first), or None when it has none."""
    out = copy.deepcopy(instance)
    node = out
    while True:
        nested = [k for k, v in node.items() if isinstance(v, dict) and v]
        if not nested:
            break
        node = node[nested[0]]
    if not node:
        return None
    node.pop(next(iter(node)))
    return out


def accepts(xgr, grammar, text: str) -> bool:
    """Whether xgrammar's matcher accepts ``text`` in full under ``grammar``."""
    return bool(xgr.testing._is_grammar_accept_string(grammar, text))


def check_grammar(xgr, grammar, schema: dict[str, Any], count: int, rng: random.Random) -> str:
    """'accepted/total instances, missing property rejected' for one grammar."""
    samples = [random_instance(schema, rng) for _ in range(count)]
    ok = sum(accepts(xgr, grammar, json.dumps(s, ensure_ascii=False)) for s in samples)
    bad = broken(samples[0]) if samples else None
    rejected = "n/a" if bad is None else ("yes" if not accepts(xgr, grammar, json.dumps(bad)) else "NO")
    return f"{ok}/{count} instances accepted, missing property rejected: {rejected}"


def main(argv: list[str] | None = None) -> int:
    """Compile, check and print; exit 1 when an engine refused a schema or rejected an instance."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=20, help="instances checked per schema")
    parser.add_argument("--llama-grammar", default=None, metavar="FILE",
                        help="llama-cpp-python's llama_grammar.py, when llama-cpp-python is not installed")
    args = parser.parse_args(argv)
    xgr = load_xgrammar()
    to_gbnf = load_llama_converter(args.llama_grammar)
    print(f"xgrammar: {'version ' + importlib.metadata.version('xgrammar') if xgr else 'not installed'}")
    print(f"llama.cpp converter: {'loaded' if to_gbnf else 'not installed'}")
    if xgr is None and to_gbnf is None:
        print("nothing to compile with: pip install xgrammar and/or llama-cpp-python")
        return 0
    compiler = None
    if xgr is not None:
        vocab = [chr(c) for c in range(32, 127)] + ["\n", "é", "中", "🙂"]
        compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(vocab), cache_enabled=False)
    rng = random.Random(0)
    failures = 0
    requests = sample_requests(sample_files())
    print(f"{len(requests)} request shapes from the samples\n")
    for name, request in requests:
        schema = role(name).reply_schema(request)
        label = f"{name} ({len(json.dumps(schema))} B schema)"
        if xgr is not None:
            try:
                start = time.perf_counter()
                grammar = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=True)
                compiler.compile_grammar(grammar)
                ms = (time.perf_counter() - start) * 1000
                result = check_grammar(xgr, grammar, schema, args.instances, rng)
                failures += "NO" in result or not result.startswith(f"{args.instances}/")
                print(f"{label:<42} xgrammar   compiled in {ms:7.1f} ms; {result}")
            except Exception as exc:  # noqa: BLE001 - report every engine error, go on
                failures += 1
                print(f"{label:<42} xgrammar   FAILED: {type(exc).__name__}: {str(exc)[:200]}")
        if to_gbnf is not None:
            try:
                start = time.perf_counter()
                gbnf = to_gbnf(json.dumps(schema))
                ms = (time.perf_counter() - start) * 1000
                rules = sum(1 for line in gbnf.splitlines() if "::=" in line)
                line = f"{label:<42} llama.cpp  converted in {ms:7.1f} ms, {rules} rules"
                if xgr is not None:
                    result = check_grammar(xgr, xgr.Grammar.from_ebnf(gbnf), schema, args.instances, rng)
                    failures += "NO" in result or not result.startswith(f"{args.instances}/")
                    line += f"; {result}"
                print(line)
            except Exception as exc:  # noqa: BLE001
                failures += 1
                print(f"{label:<42} llama.cpp  FAILED: {type(exc).__name__}: {str(exc)[:200]}")
    print(f"\n{failures} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
