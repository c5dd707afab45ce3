"""The persistent sandbox worker now against the worker of an earlier commit, side by side in one process.

The supervisor's source travels into the sandbox as ``python3 -c SOURCE``, so an older version runs in the
same kind of sandbox by handing :class:`~turnkit.sandbox.LocalSandbox` that version's source (its modules read
with ``git show REV:turnkit/sandbox/...`` and joined as the current version joins its own). Calls alternate
between the two workers, the order flipping every round; p50s over all samples, and the fork limit (fork a warm
sandboxed interpreter, exit, reap) once per round beside them. The current worker runs twice: as a root host runs
it (each call under a uid of its own) and with a jail per call (as a host that is not root runs it). It also runs
the same ten test calls as one :func:`~turnkit.sandbox.run_batch` (a per-call result and alarm each), which older
ones lack.

Run:  python benchmarks/bench_worker_ab.py --baseline a5084ad --n 300
      (or ``turnkit bench worker_ab -- --baseline a0a69c8``)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from turnkit.sandbox import Limits, LocalSandbox, _wire, local, run_batch

REPO = Path(__file__).resolve().parents[1]
TESTS = "def f(x):\n    return x * x\n" + "".join(f"assert f({i}) == {i * i}\n" for i in range(10))
CODES = {"pass": "pass", "define + 10 test calls": TESTS}
BATCH_SETUP = "def f(x):\n    return x * x\n"
BATCH_CALLS = [f"f({i})" for i in range(10)]
BATCH_LABEL, BATCH_OF = "define + 10 calls, run_batch", "define + 10 test calls"
FORK_LIMIT = (
    "import os, statistics, time\nxs = []\nfor _ in range(20):\n    t = time.perf_counter()\n    pid = os.fork()\n"
    "    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    xs.append(time.perf_counter() - t)\n"
    "print(statistics.median(xs))\n"
)


def worker_with(source: str, second_uid: bool = True, limits: Limits | None = None) -> LocalSandbox:
    """A started persistent LocalSandbox whose supervisor runs ``source``.

    ``second_uid`` off: bubblewrap with one uid (an older supervisor's sandbox; the current one then jails each
    call, as on a host that is not root).
    """
    current, uid_before = _wire.supervisor_source, local.SECOND_UID
    _wire.supervisor_source = lambda: source  # type: ignore[assignment]
    local.SECOND_UID = second_uid
    try:
        sb = LocalSandbox(limits, persistent=True)
        sb.run_python("pass")  # starts the worker with this source
    finally:
        _wire.supervisor_source = current  # type: ignore[assignment]
        local.SECOND_UID = uid_before
    return sb


def source_at(rev: str) -> str:
    """The supervisor's script at a git revision (one module before the split into three, joined after it)."""

    def read(name: str) -> str:
        shown = subprocess.run(
            ["git", "show", f"{rev}:turnkit/sandbox/{name}"], cwd=REPO, capture_output=True, text=True
        )
        if shown.returncode != 0:
            raise FileNotFoundError(shown.stderr.strip())
        return shown.stdout

    try:
        read("_frames.py")
    except FileNotFoundError:
        try:
            return read("_supervisor.py")
        except FileNotFoundError as exc:
            raise SystemExit(f"cannot read the baseline supervisor: {exc}") from None

    def read_if_there(name: str) -> str:  # modules added since (the zygote, the streams) are empty at REV
        try:
            return read(name)
        except FileNotFoundError:
            return ""

    return _wire.join_supervisor_source(read_if_there)


def accept_replies_without_ids() -> None:
    """Let this process's sandboxes accept replies without a request id: supervisors before the trust boundary
    (#37) did not echo one. The current worker echoes its ids, so its own calls are unaffected."""
    checked = _wire.check_reply_id

    def check(frame: _wire.Frame, request_id: str) -> None:
        if "id" in frame[0]:
            checked(frame, request_id)

    _wire.check_reply_id = check  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision whose supervisor is the baseline")
    parser.add_argument("--n", type=int, default=300, help="samples per row")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(None if argv is None else [a for a in argv if a != "--"])
    baseline = source_at(args.baseline)
    accept_replies_without_ids()
    workers = {
        f"baseline {args.baseline}": worker_with(baseline, second_uid=False),
        "now": worker_with(_wire.supervisor_source()),
        "now, jail per call": worker_with(_wire.supervisor_source(), second_uid=False),
    }
    samples = {(w, c): [] for w in workers for c in CODES}
    forks: list[float] = []
    batch_samples: list[float] = []
    try:
        for r in range(args.n):
            order = list(workers.items()) if r % 2 else list(reversed(workers.items()))
            for name, sb in order:
                for label, code in CODES.items():
                    t0 = time.perf_counter()
                    result = sb.run_python(code, timeout=30)
                    samples[(name, label)].append(time.perf_counter() - t0)
                    assert result.ok, result
            t0 = time.perf_counter()
            batch = run_batch(workers["now"], BATCH_SETUP, BATCH_CALLS)
            batch_samples.append(time.perf_counter() - t0)
            assert batch.ok and batch.calls[-1].value == ["int", "81"], batch
            if r % 10 == 0:
                forks.append(float(workers["now"].run_python(FORK_LIMIT, timeout=30).stdout))
    finally:
        for sb in workers.values():
            sb.close()
    p50 = {key: 1e3 * statistics.median(v) for key, v in samples.items()}
    fork_ms = 1e3 * statistics.median(forks)
    base = f"baseline {args.baseline}"
    rows = [
        {"worker": w, "code": c, "p50_ms": p50[(w, c)], "x_baseline": p50[(w, c)] / p50[(base, c)]}
        for w in workers
        for c in CODES
    ]
    batch_ms = 1e3 * statistics.median(batch_samples)
    rows.append(
        {"worker": "now", "code": BATCH_LABEL, "p50_ms": batch_ms, "x_baseline": batch_ms / p50[(base, BATCH_OF)]}
    )
    if args.json:
        print(json.dumps({"rows": rows, "fork_limit_p50_ms": fork_ms, "n": args.n}, indent=2))
        return 0
    print(f"persistent worker calls, {args.n} interleaved samples per row; fork limit {fork_ms:.3f} ms p50")
    print(f"{'worker':<22} {'code':<30} {'p50 ms':>8} {'× baseline':>11} {'× fork limit':>13}")
    for row in rows:
        print(
            f"{row['worker']:<22} {row['code']:<30} {row['p50_ms']:>8.3f} {row['x_baseline']:>11.2f} "
            f"{row['p50_ms'] / fork_ms:>13.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
