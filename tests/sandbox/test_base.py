"""The contract pieces that need no sandbox: Limits, paths, wire validation, symlink-safe host I/O."""

from __future__ import annotations

import os

import pytest

from turnkit.errors import ConfigError, SandboxError
from turnkit.sandbox import DockerSandbox, Limits, LocalSandbox, Sandbox
from turnkit.sandbox._frames import FrameDecoder, FrameError, encode_frame
from turnkit.sandbox._hostio import read_under, write_under
from turnkit.sandbox._wire import ProtocolError, ReplyReader, result_from_frame
from turnkit.sandbox.base import sandbox_path, to_bytes


def test_limits_are_frozen():
    with pytest.raises(AttributeError):
        Limits().memory_mb = 1  # type: ignore[misc]


def test_limits_network_off_by_default():
    assert Limits().network is False


@pytest.mark.parametrize("field", ["wall_time_s", "memory_mb", "pids", "output_bytes", "cpus"])
def test_limits_reject_non_positive(field):
    with pytest.raises(ConfigError, match=field):
        Limits(**{field: 0})


def test_limits_cpu_seconds_follow_timeout():
    assert (Limits().cpu_seconds(2.5), Limits(cpu_time_s=7.2).cpu_seconds(2.5)) == (4, 8)


def test_both_backends_implement_every_protocol_method():
    methods = ["run", "run_python", "write_file", "read_file", "close", "__enter__", "__exit__"]
    assert all(callable(getattr(cls, m, None)) for cls in (LocalSandbox, DockerSandbox) for m in methods)


def test_local_sandbox_is_a_sandbox():
    with pytest.warns(UserWarning), LocalSandbox(unsafe_no_isolation=True) as sb:
        assert isinstance(sb, Sandbox)


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "/work", "a/../../x", "", "a\x00b"])
def test_sandbox_path_rejects_escapes(path):
    with pytest.raises(SandboxError):
        sandbox_path(path)


def test_to_bytes_keeps_lone_surrogates():
    assert to_bytes("\udcff") == b"\xed\xb3\xbf"


def test_frame_decoder_rejects_bad_magic():
    with pytest.raises(FrameError, match="magic"):
        FrameDecoder(1024).feed(b"XXXX\x00\x00\x00\x02{}")


def test_frame_decoder_rejects_oversized_blob():
    frame = encode_frame({}, [b"x" * 100])
    with pytest.raises(FrameError, match="exceeds"):
        FrameDecoder(64).feed(frame)


def test_frame_decoder_splits_concatenated_frames_fed_bytewise():
    data = encode_frame({"a": 1}, [b"x"]) + encode_frame({"b": 2}, [])
    dec = FrameDecoder(1024)
    frames = [f for i in range(len(data)) for f in dec.feed(data[i : i + 1])]
    assert [h.get("a", h.get("b")) for h, _ in frames] == [1, 2]


def test_forged_reply_with_wrong_types_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        result_from_frame(({"exit_code": "0"}, [b"", b""]))


def test_reply_reader_times_out():
    r, w = os.pipe()
    try:
        with pytest.raises(TimeoutError):
            ReplyReader(r, max_bytes=1024).next(deadline=0)
    finally:
        os.close(r)
        os.close(w)


def test_reply_reader_reports_eof_as_none():
    r, w = os.pipe()
    os.close(w)
    try:
        import time

        assert ReplyReader(r, max_bytes=1024).next(deadline=time.monotonic() + 1) is None
    finally:
        os.close(r)


def test_host_write_refuses_planted_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "work").mkdir()
    os.symlink(victim, tmp_path / "work" / "link")
    with pytest.raises(SandboxError, match="symlink"):
        write_under(str(tmp_path / "work"), "link", b"pwned")
    assert victim.read_text() == "keep"


def test_host_write_refuses_symlinked_directory(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "work" / "dir")
    with pytest.raises(SandboxError):
        write_under(str(tmp_path / "work"), "dir/f.txt", b"x")
    assert list((tmp_path / "outside").iterdir()) == []


def test_host_write_refuses_hard_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "work").mkdir()
    os.link(victim, tmp_path / "work" / "hard")
    with pytest.raises(SandboxError, match="single link"):
        write_under(str(tmp_path / "work"), "hard", b"pwned")
    assert victim.read_text() == "keep"


def test_host_read_refuses_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SandboxError, match="not a regular file"):
        read_under(str(tmp_path), "pipe", max_bytes=10)


def test_host_read_refuses_oversized_file(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(SandboxError, match="exceeds"):
        read_under(str(tmp_path), "big", max_bytes=10)
