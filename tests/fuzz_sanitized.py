"""The decoder fuzz (tests/test_decode.py) against a build of _otlpdecode.c with AddressSanitizer and
UndefinedBehaviorSanitizer: run by test_decode.py briefly, and on demand for longer:

    python tests/fuzz_sanitized.py ITERATIONS [SEED]

It builds the sanitized extension into a temporary directory, then runs the fuzz in a child Python with the
sanitizers' runtime preloaded and that build in place of the installed one; any memory error or undefined
behaviour aborts the child (exit code not 0), any difference from the protobuf runtime fails an assertion."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "collector" / "receiver" / "_otlpdecode.c"
MODULE = "mastwatch.collector.receiver._otlpdecode"
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-O1", "-g"]


def build(out: Path) -> Path:
    target = out / f"_otlpdecode{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["cc", *FLAGS, "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o",
                    str(target)], check=True, capture_output=True, timeout=300)
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(target)], capture_output=True, text=True,
                             check=True).stdout
    # instrumented: its loads and stores call the sanitizers' checks
    assert "__asan_report" in symbols and "__ubsan_handle" in symbols, "the build is not sanitized"
    return target


def run(iterations: int, seed: int, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Build, then fuzz in a child process; its result (check returncode and stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        built = build(Path(tmp))
        runtime = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        env = {**os.environ, "LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1",
               "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1", "MASTWATCH_SANITIZED": str(built)}
        return subprocess.run([sys.executable, __file__, "--child", str(iterations), str(seed)], env=env,
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _child(iterations: int, seed: int) -> None:
    spec = importlib.util.spec_from_file_location(MODULE, os.environ["MASTWATCH_SANITIZED"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[MODULE] = module  # before decode.py imports it
    sys.path.insert(0, str(ROOT))
    from tests import test_decode as t
    from tests.otlp_corpus import corpus

    assert t.decode_mod._decode_c is module.decode_request, "the sanitized build is not the one in use"
    rng = random.Random(seed)
    pool = t.fuzz_pool([request.SerializeToString() for _, _, request in corpus()])
    for i in range(iterations):
        data = t.mutate(rng, rng.choice(pool), pool) if i % 2 else t.gen_msg(rng, "request")
        t.assert_same(data)
    print(f"{iterations} inputs, no difference from the protobuf runtime, no sanitizer report")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        result = run(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr[-20000:])
        sys.exit(result.returncode)
