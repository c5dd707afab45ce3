"""The viewer's JSON API over real HTTP on loopback: discovery, paging, filters, privileged data, broken files."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.view import builders
from turnkit.rollout.evaluate import EpisodeSink
from turnkit.view import EpisodeIndex, ViewerApi, ViewerServer, make_server


def get(server: ViewerServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=10) as reply:
            body = reply.read()
            is_json = reply.headers["Content-Type"].startswith("application/json")
            return reply.status, json.loads(body) if is_json else body
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_sources_lists_every_kind(server: ViewerServer) -> None:
    status, body = get(server, "api/sources")
    assert status == 200
    kinds = {s["id"]: s["kinds"] for s in body["sources"]}
    assert kinds == {
        "eval": ["eval"],
        "eval-privileged": ["eval"],
        "rollouts": ["eval"],
        "synth": ["run", "synth"],
        "train": ["run"],
        "train-b": ["run"],
    }


def test_run_has_series_evals_and_checkpoints(server: ViewerServer) -> None:
    status, run = get(server, "api/run?id=train")
    assert status == 200
    assert run["keys"][:3] == ["reward_mean", "success_rate", "eval_success"]
    assert "length/total" in run["keys"] and "policy_lag" in run["keys"]
    assert run["series"]["loss"][0] == [1, 1.0] and len(run["series"]["loss"]) == 12
    assert [(e["label"], e["lo"], e["hi"]) for e in run["evals"]] == [("step 6", 0.35, 0.55), ("step 12", 0.5, 0.7)]
    assert [c["name"] for c in run["checkpoints"]] == ["step-000006", "step-000012"]
    assert run["problems"] == []


def test_eval_summary_gives_an_interval_row(server: ViewerServer) -> None:
    _, run = get(server, "api/run?id=eval")
    [row] = run["evals"]
    assert row["label"] == "summary" and row["episodes"] == 60 and row["lo"] < row["success"] < row["hi"]
    assert row["errors"] == 9  # seeds 3, 10, ..., 59


def test_paging_covers_every_episode_once(server: ViewerServer) -> None:
    seen = []
    for offset in (0, 25, 50):
        _, page = get(server, f"api/episodes?id=eval&offset={offset}&limit=25")
        assert page["total"] == page["matched"] == 60
        seen += [e["seed"] for e in page["items"]]
    assert seen == list(range(60))


def test_sort_and_filters(server: ViewerServer) -> None:
    _, page = get(server, "api/episodes?id=eval&sort=return&order=desc&limit=500")
    returns = [e["return"] for e in page["items"]]
    assert returns == sorted(returns, reverse=True) and returns[0] == 1.0 and returns[-1] == 0.0
    _, errored = get(server, "api/episodes?id=eval&error=timeout&limit=500")
    assert [e["seed"] for e in errored["items"]] == [s for s in range(60) if s % 7 == 3]
    assert errored["causes"] == ["timeout"] and errored["items"][0]["error_message"].startswith("episode exceeded")
    _, clean = get(server, "api/episodes?id=eval&error=none&success=yes&limit=500")
    assert all(e["success"] and not e["error"] for e in clean["items"]) and clean["matched"] == 26
    _, longest = get(server, "api/episodes?id=eval&sort=turns&order=desc&limit=1")
    assert longest["items"][0]["turns"] == 2
    _, one = get(server, "api/episodes?id=eval&seed=17")
    assert [e["seed"] for e in one["items"]] == [17]
    _, text = get(server, "api/episodes?id=eval&q=t-42")
    assert [e["seed"] for e in text["items"]] == [42]  # the task id
    _, prompt = get(server, "api/episodes?id=eval&q=what%20is%202%2B5")
    assert {e["seed"] % 10 for e in prompt["items"]} == {2} and prompt["matched"] >= 1


def test_ties_keep_file_order_both_ways(server: ViewerServer) -> None:
    for order in ("asc", "desc"):
        _, page = get(server, f"api/episodes?id=eval&sort=return&order={order}&limit=500")
        items = page["items"]
        assert [e["return"] for e in items] == sorted((e["return"] for e in items), reverse=order == "desc")
        for value in (0.0, 1.0):
            tied = [e["index"] for e in items if e["return"] == value]
            assert len(tied) > 1 and tied == sorted(tied), (order, value)
    _, turns = get(server, "api/episodes?id=eval&sort=turns&limit=500")
    assert [e["index"] for e in turns["items"][:3]] == [3, 10, 17]  # the one-turn (errored) episodes, in file order


def test_a_known_cause_with_no_episode_filters_to_none(server: ViewerServer) -> None:
    status, page = get(server, "api/episodes?id=eval&error=sandbox")
    assert status == 200 and page["matched"] == 0 and page["causes"] == ["timeout"]


def test_privileged_data_only_on_request(server: ViewerServer) -> None:
    _, plain = get(server, "api/episode?id=eval-privileged&i=0")
    assert "privileged" not in plain and plain["_view"]["privileged"] == ["privileged"]
    assert plain["steps"][0]["token_ids"] == [11, 12, 13]
    _, shown = get(server, "api/episode?id=eval-privileged&i=0&privileged=1")
    assert shown["privileged"] == {"answer": "0", "hidden_tests": ["0+0"]}


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("api/episodes?id=eval&sort=length", 400, "sort must be one of"),
        ("api/episodes?id=eval&offset=x", 400, "offset must be an integer"),
        ("api/episodes?id=eval&offset=-1", 400, "offset must be 0 or more, got -1"),
        ("api/episodes?id=eval&limit=0", 400, "limit must be between 1 and 500, got 0"),
        ("api/episodes?id=eval&limit=501", 400, "limit must be between 1 and 500, got 501"),
        ("api/episodes?id=eval&error=bogus", 400, "error must be none, any or an error cause (agent, "),
        ("api/episodes?id=eval&success=maybe", 400, "success must be yes or no, got 'maybe'"),
        ("api/episode?id=eval&i=60", 404, "no episode 60 in eval/trajectories.jsonl (60 episodes)"),
        ("api/run?id=nowhere", 404, "'nowhere' is not a run, eval or synth folder"),
        ("api/run?id=../..", 404, "is outside"),
        ("api/trees?id=train", 404, "holds no synth data"),
        ("api/tree?id=synth&tree=seed_0", 400, "not a tree id"),
        ("api/tree?id=synth&tree=iter_000/seed_9", 404, "seed_9.json: missing (this folder's trees: iter_000/seed_0, "),
        ("api/nothing", 404, "no API route"),
        ("files/../../etc/passwd", 404, "no picture"),
    ],
)
def test_bad_requests_are_answered_with_a_message(server: ViewerServer, path: str, status: int, words: str) -> None:
    got, body = get(server, path)
    assert got == status and words in body["error"]


def test_tree_nodes_and_pairs_link_to_nodes(server: ViewerServer) -> None:
    _, trees = get(server, "api/trees?id=synth")
    assert [t["tree"] for t in trees["trees"]] == ["iter_000/seed_0", "iter_000/seed_1"]
    _, tree = get(server, "api/tree?id=synth&tree=iter_000/seed_1")
    assert [(n["id"], n["visits"], n["q"]) for n in tree["nodes"]] == [
        (0, 10, 0.4), (1, 7, 0.6), (2, 3, -1.0), (3, 5, 1.0), (4, 2, -1.0)
    ]  # fmt: skip
    links = [(p["step"], p["parent"], p["chosen_node"], p["rejected_node"]) for p in tree["pairs"]]
    assert links == [(0, 0, 1, 2), (1, 1, 3, 4)]
    assert tree["pairs"][1]["chosen"] == "ANSWER: 4" and tree["pairs"][1]["rejected"] == "ANSWER: 3"


def test_broken_files_are_named_with_their_line(broken_server: ViewerServer) -> None:
    _, run = get(broken_server, "api/run?id=cut-run")
    assert [p["text"] for p in run["problems"]] == [
        "cut-run/metrics.jsonl:4: invalid JSON: Unterminated string starting at (column 13)"
    ]
    assert len(run["series"]["reward_mean"]) == 3  # the good lines still draw
    _, page = get(broken_server, "api/episodes?id=bad-eval")
    assert page["total"] == 5
    bad_line = "bad-eval/trajectories.jsonl:3: invalid JSON: Expecting value (column 1)"
    assert [p["text"] for p in page["problems"]] == [bad_line]
    _, missing = get(broken_server, "api/run?id=no-metrics")
    assert [p["text"] for p in missing["problems"]] == ["no-metrics/metrics.jsonl: missing (no step has been logged)"]


def test_a_cut_tree_is_named_in_a_whole_sentence(broken_server: ViewerServer) -> None:
    status, body = get(broken_server, "api/tree?id=cut-tree&tree=iter_000/seed_1")
    assert status == 422
    assert body["error"].startswith("cut-tree/iter_000/trees/seed_1.json:1: invalid JSON: Unterminated string starting")
    assert body["error"].endswith("; the file ends there (cut short, or still being written)")
    assert get(broken_server, "api/tree?id=cut-tree&tree=iter_000/seed_0")[0] == 200  # the other tree still reads


def test_rollout_folders_are_their_own_kind(tmp_path: Path) -> None:
    builders.write_run_with_rollouts(tmp_path / "run")
    builders.write_eval(tmp_path / "rollouts-eval", n=3)  # named like one, but not a run's rollouts/step-N
    api = ViewerApi(tmp_path)
    kinds = {s["id"]: s["kinds"] for s in api.answer("sources", {})[1]["sources"]}
    assert kinds == {
        "rollouts-eval": ["eval"],
        "run": ["run"],
        "run/rollouts/step-000002": ["rollouts"],
        "run/rollouts/step-000004": ["rollouts"],
    }
    status, page = api.answer("episodes", {"id": "run/rollouts/step-000004"})
    assert status == 200 and page["total"] == 4
    assert api.answer("episodes", {"id": "run"}) == (
        404, {"error": "'run' holds no eval or rollouts data (it holds: run)"}
    )  # fmt: skip


def request(server: ViewerServer, path: str, host: str | None) -> tuple[int, dict[str, Any] | bytes]:
    """A GET with exactly this ``Host`` header (``None``: none at all), as a DNS-rebinding page would send it."""
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        reply = conn.getresponse()
        body = reply.read()
        is_json = (reply.getheader("Content-Type") or "").startswith("application/json")
        return reply.status, json.loads(body) if is_json else body
    finally:
        conn.close()


def test_only_loopback_host_names_are_answered(server: ViewerServer) -> None:
    port = server.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"127.8.0.1:{port}"):
        status, body = request(server, "/api/sources", host)
        assert status == 200 and len(body["sources"]) == 6, host
    for host, why in [
        (f"rebind.example:{port}", f"Host header 'rebind.example:{port}' is not a loopback name"),
        (f"192.168.1.5:{port}", f"Host header '192.168.1.5:{port}' is not a loopback name"),
        (
            f"127.0.0.1:{port + 1}",
            f"Host header '127.0.0.1:{port + 1}' names port {port + 1}, not this server's {port}",
        ),
        ("localhost", f"Host header 'localhost' names no port (so 80), not this server's {port}"),
        (None, "no Host header"),
    ]:
        for path in ("/api/sources", "/api/episode?id=eval-privileged&i=0&privileged=1", "/", "/static/app.js"):
            status, body = request(server, path, host)
            assert status == 403 and isinstance(body, dict), (host, path)
            assert body["error"].startswith(f"refused: {why}") and "DNS rebinding" in body["error"], body
            assert "hidden_tests" not in json.dumps(body)


def test_ipv6_loopback_host_is_answered(tmp_path: Path) -> None:
    try:
        server = make_server(tmp_path, host="::1", port=0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        conn = http.client.HTTPConnection("::1", port, timeout=10)
        conn.request("GET", "/api/sources")  # Host: [::1]:port
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.shutdown()
        server.server_close()


def test_favicon_is_an_empty_answer(server: ViewerServer) -> None:
    with urllib.request.urlopen(server.url + "favicon.ico", timeout=10) as reply:
        assert reply.status == 204 and reply.read() == b""


def test_an_empty_folder_says_what_was_looked_for(empty_server: ViewerServer) -> None:
    _, body = get(empty_server, "api/sources")
    assert body["sources"] == [] and "holds no run, eval or synth folder" in body["note"]


def test_index_follows_a_growing_file(tmp_path: Path) -> None:
    sink = EpisodeSink(tmp_path)
    sink(builders.episodes(3))
    index = EpisodeIndex(tmp_path / "trajectories.jsonl")
    assert len(index) == 3
    path = tmp_path / "trajectories.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"env_id": "e", "seed": 99, "st')  # a writer half-way through a line
    page = index.page()
    assert page["total"] == 3
    assert [p["line"] for p in page["problems"]] == [4] and "still being written" in page["problems"][0]["message"]
    with open(path, "a", encoding="utf-8") as f:
        f.write('eps": []}\n')
    sink(builders.episodes(2, first=100))
    page = index.page(limit=10)
    assert [e["seed"] for e in page["items"]] == [0, 1, 2, 99, 100, 101] and page["problems"] == []
    sink.__init__(tmp_path)  # a new evaluation into the same folder starts the file again
    sink(builders.episodes(1, first=7))
    assert [e["seed"] for e in index.page()["items"]] == [7]


def test_cli_refuses_a_public_host_and_a_missing_folder(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "turnkit.cli", "view", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    public = run(str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    assert public.returncode == 2 and "loopback address only" in public.stderr
    missing = run(str(tmp_path / "nope"), "--port", "0")
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


def test_cli_serves_until_ctrl_c(root: Path) -> None:
    # Ctrl-C raises KeyboardInterrupt as in a terminal, even when this test runs with SIGINT ignored (a background
    # job of a non-interactive shell): a child inherits an ignored SIGINT and would never see the test's Ctrl-C.
    run_cli = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from turnkit.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    cmd = [sys.executable, "-c", run_cli, "view", str(root), "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith(f"turnkit view: {root} at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "api/sources", timeout=10) as reply:
            assert len(json.load(reply)["sources"]) == 6
        with urllib.request.urlopen(url, timeout=10) as reply:
            page = reply.read().decode()
            assert reply.headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert '<script src="/static/app.js">' in page and "http" not in page.replace('"/static/', "")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
