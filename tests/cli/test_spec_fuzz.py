"""A few hundred generated spec documents, valid and hostile, through `submit --dry-run`: each is
accepted (0) or refused as a spec error (3), never an internal error. scripts/fuzz_specs.py runs
the same strategy over tens of thousands of documents."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.fakeslurm import FakeSlurm
from tests.spec_documents import dry_run_exit_code, spec_texts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(text=spec_texts())
def test_every_generated_spec_exits_0_or_3(text: str, fake_slurm: FakeSlurm) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(text, encoding="utf-8", errors="surrogatepass")
        code, err = dry_run_exit_code(spec)
    assert code in (0, 3), f"exit {code}\n{err}\n--- spec ---\n{text}"
