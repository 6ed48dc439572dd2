"""The guard's decisions (pure) and the peer-owner lookup on this host's real sockets."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

from vertexdist import peer_uid
from vertexdist.request_guard import (
    WritePolicy,
    check,
    check_content_type,
    check_host,
    check_origin,
    check_owner,
)

PORT = 8123
JSON_ONLY, STORAGE = WritePolicy.JSON_ONLY, WritePolicy.STORAGE


@pytest.mark.parametrize("host", ["127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123", "[::1]:8123"])
def test_the_served_address_is_a_host_it_answers(host: str) -> None:
    assert check_host(host, PORT) is None


@pytest.mark.parametrize(
    "host", [None, "evil.example", "evil.example:8123", "127.0.0.1", "127.0.0.1:8124", "127.0.0.2:8123", ""]
)
def test_any_other_host_is_400(host: str | None) -> None:
    refusal = check_host(host, PORT)
    assert refusal is not None and refusal.status == 400 and "127.0.0.1:8123" in refusal.message


def test_only_its_own_origin_or_none_passes() -> None:
    assert check_origin(None, PORT) is None
    assert check_origin("http://127.0.0.1:8123", PORT) is None
    assert check_origin("http://localhost:8123", PORT) is None
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8123"):
        refusal = check_origin(origin, PORT)
        assert refusal is not None and refusal.status == 403, origin


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_json_apis_take_writes_as_json_only(method: str) -> None:
    assert check_content_type(method, "application/json", "2", JSON_ONLY) is None
    assert check_content_type(method, "Application/JSON; charset=utf-8", "2", JSON_ONLY) is None
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        refusal = check_content_type(method, kind, "2", JSON_ONLY)
        assert refusal is not None and refusal.status == 415, kind


def test_a_bodiless_delete_needs_no_type_on_a_json_api() -> None:
    """gcloud's `ai persistent-resources delete`: no body, no type. A page cannot send a DELETE cross-origin
    without a preflight; a DELETE with a body, or any other bodiless write, still needs JSON."""
    for length in (None, "0"):
        assert check_content_type("DELETE", None, length, JSON_ONLY) is None
    for method, kind, length in (("DELETE", None, "2"), ("DELETE", "text/plain", "0"), ("POST", None, "0")):
        refusal = check_content_type(method, kind, length, JSON_ONLY)
        assert refusal is not None and refusal.status == 415, (method, kind, length)
    refusal = check(
        "DELETE", {"Host": f"127.0.0.1:{PORT}", "Origin": "http://evil.example"}.get, PORT, JSON_ONLY
    )
    assert refusal is not None and refusal.status == 403


def test_reads_carry_any_type() -> None:
    assert check_content_type("GET", "text/plain", None, JSON_ONLY) is None
    assert check_content_type("HEAD", None, None, STORAGE) is None


def test_storage_posts_refuse_what_a_page_can_send_cross_origin() -> None:
    for kind in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; b=1"):
        refusal = check_content_type("POST", kind, "10", STORAGE)
        assert refusal is not None and refusal.status == 415, kind
    refusal = check_content_type("POST", None, "10", STORAGE)  # fetch() of a bare ArrayBuffer
    assert refusal is not None and refusal.status == 415


def test_storage_takes_its_own_upload_types() -> None:
    for kind in ("application/json", 'multipart/related; boundary="==x=="', "application/octet-stream"):
        assert check_content_type("POST", kind, "10", STORAGE) is None
    assert check_content_type("POST", "image/png", "10", STORAGE) is None  # a media upload's own type
    assert check_content_type("POST", None, "0", STORAGE) is None  # copy_blob: no body, no type
    assert check_content_type("POST", None, None, STORAGE) is None
    assert check_content_type("DELETE", None, None, STORAGE) is None
    # A resumable upload's chunk is a PUT of the object's own type: no browser sends one without a preflight.
    assert check_content_type("PUT", "text/plain", "10", STORAGE) is None


def test_check_runs_host_then_origin_then_type() -> None:
    headers = {"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}
    refusal = check("POST", headers.get, PORT, JSON_ONLY)
    assert refusal is not None and refusal.status == 400
    headers["Host"] = "127.0.0.1:8123"
    refusal = check("POST", headers.get, PORT, JSON_ONLY)
    assert refusal is not None and refusal.status == 403
    del headers["Origin"]
    refusal = check("POST", headers.get, PORT, JSON_ONLY)
    assert refusal is not None and refusal.status == 415
    headers["Content-Type"] = "application/json"
    assert check("POST", headers.get, PORT, JSON_ONLY) is None


def test_only_the_owner_and_root_pass_the_owner_check() -> None:
    assert check_owner(1000, 1000, can_tell=True) is None
    assert check_owner(0, 1000, can_tell=True) is None
    other = check_owner(65534, 1000, can_tell=True)
    assert other is not None and other.status == 403 and "uid 1000" in other.message
    unknown = check_owner(None, 1000, can_tell=True)
    assert unknown is not None and unknown.status == 403
    assert check_owner(None, 1000, can_tell=False) is None  # no socket tables: documented limit


def test_proc_addresses_are_printed_as_the_kernel_prints_them() -> None:
    if sys.byteorder == "little":
        assert peer_uid.proc_address("127.0.0.1", 8080) == "0100007F:1F90"
        assert peer_uid.proc_address("::1", 80) == "00000000000000000000000001000000:0050"
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1\n"
        "   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1\n"
    )
    if sys.byteorder == "little":
        assert peer_uid.proc_row(table, ("127.0.0.1", 0xD431), ("127.0.0.1", 8080)) == (1000, 222)
        assert peer_uid.proc_row(table, ("127.0.0.1", 0xD432), ("127.0.0.1", 8080)) is None


@pytest.mark.skipif(not peer_uid.can_tell(), reason="this system shows no socket owners (not Linux)")
@pytest.mark.parametrize("how", ["netlink", "proc"])
def test_a_live_peer_is_its_owners_and_a_closed_one_nobodys(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_netlink(*_: object) -> None:
        raise OSError("no sock_diag here")

    if how == "proc":
        monkeypatch.setattr(peer_uid, "_netlink", no_netlink)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        accepted, peer = server.accept()
        with accepted:
            assert peer_uid.lookup(peer, server.getsockname()) == os.geteuid()
            assert peer_uid.lookup((peer[0], peer[1] ^ 1), server.getsockname()) is None
            client.close()  # now in FIN_WAIT2, then TIME_WAIT: no owner to tell, so never root
            time.sleep(0.05)
            assert peer_uid.lookup(peer, server.getsockname()) is None
