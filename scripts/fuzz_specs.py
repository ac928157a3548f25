#!/usr/bin/env python3
"""Fuzz spec loading: generated spec documents, valid and hostile, through `campaignctl submit
--dry-run` (in this process, the installed entry point with its error boundary; Slurm faked at the
process boundary). Every document must end in exit 0 (accepted) or 3 (refused as a spec error).
Prints counts by exit code, documents per second, and the first document of each other code
(kept under --keep). Usage: .venv/bin/python scripts/fuzz_specs.py [--examples 10000] [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings

from campaignctl.adapters import proc
from tests.fakeslurm import FakeSlurm
from tests.spec_documents import dry_run_exit_code, spec_texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=Path("fuzz-failures"))
    args = parser.parse_args()
    proc.EXECUTOR = FakeSlurm()
    proc.time.sleep = lambda _s: None  # type: ignore[assignment]
    codes: Counter[int] = Counter()
    kept: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        import os
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        spec = Path(tmp) / "spec.yaml"

        @seed(args.seed)
        @settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(text=spec_texts())
        def one(text: str) -> None:
            spec.write_text(text, encoding="utf-8", errors="surrogatepass")
            code, err = dry_run_exit_code(spec)
            codes[code] += 1
            if code not in (0, 3) and code not in kept:
                kept.add(code)
                args.keep.mkdir(exist_ok=True)
                (args.keep / f"exit{code}.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
                (args.keep / f"exit{code}.stderr").write_text(err)

        started = time.perf_counter()
        one()
        elapsed = time.perf_counter() - started
    total = sum(codes.values())
    print(f"{total} documents in {elapsed:.1f} s ({total / elapsed:.0f}/s), seed {args.seed}")
    for code, n in sorted(codes.items()):
        print(f"  exit {code:>3}: {n:>6} ({n / total:.1%})")
    bad = {c: n for c, n in codes.items() if c not in (0, 3)}
    if bad:
        print(f"unexpected exit codes {sorted(bad)}: first documents kept in {args.keep}/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
