"""How long a strict reply schema takes: built for a new request shape, and found in the cache.

Run:  python benchmarks/perf/schema_bench.py              (every request shape of the samples)
      python benchmarks/perf/schema_bench.py --repeat 20  (fewer rounds; for CI)

The requests are those the sample benchmarks give rise to (``evalledger.testing.sample_requests``).
For each, the schema is built from scratch (every cache cleared first) and then asked again (a
cache hit). The baseline, measured in the same run, is pydantic's ``model_json_schema()`` of the
role's reply model: what the judge used to send. Target: under 0.2 ms per schema, built or cached.

Exit status 0 when the target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial

from evalledger.stages.judge import reply_schemas, template_schema
from evalledger.stages.judge.registry import role
from evalledger.testing.sample_requests import sample_files, sample_requests

TARGET_MS = 0.2
CACHES = [reply_schemas.excerpts_schema, reply_schemas.reasoning_schema, reply_schemas.trait_schema,
          reply_schemas.claims_schema, reply_schemas.risks_schema, reply_schemas.decompose_schema,
          reply_schemas.findings_schema, template_schema._strict_schema]


def per_call_ms(fn, repeat: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def build_fresh(spec, request) -> None:
    """Build ``request``'s schema with every schema cache emptied first."""
    for cache in CACHES:
        cache.cache_clear()
    spec.reply_schema(request)


def main(argv: list[str] | None = None) -> int:
    """Measure, print one line per role and the totals; exit 1 on a missed target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="rounds per request (median taken)")
    args = parser.parse_args(argv)
    requests = sample_requests(sample_files())
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for name, request in requests:
        spec = role(name)
        built = per_call_ms(partial(build_fresh, spec, request), args.repeat)
        cached = per_call_ms(partial(spec.reply_schema, request), args.repeat)
        baseline = per_call_ms(spec.reply.model_json_schema, max(5, args.repeat // 10))
        rows.setdefault(name, []).append((built, cached, baseline))
    print(f"{len(requests)} request shapes from the samples; median ms per schema (target < {TARGET_MS} ms)")
    print(f"{'role':<18}{'shapes':>7}{'built':>10}{'cached':>10}{'pydantic':>10}{'ratio':>8}")
    worst = 0.0
    for name, found in sorted(rows.items()):
        built = max(r[0] for r in found)
        cached = max(r[1] for r in found)
        baseline = statistics.median(r[2] for r in found)
        worst = max(worst, built, cached)
        print(f"{name:<18}{len(found):>7}{built:>10.4f}{cached:>10.4f}{baseline:>10.4f}{baseline / built:>7.1f}x")
    met = worst < TARGET_MS
    print(f"slowest schema: {worst:.4f} ms (target < {TARGET_MS} ms): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
