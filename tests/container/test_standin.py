"""The local stand-in base: which Dockerfiles can be given it (pure), and the one line a build says."""

from __future__ import annotations

import pytest

from vertexdist.container import standin
from vertexdist.container.standin import STANDIN_IMAGE, base_image_arg, local_build_args

PREBUILT = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"


def test_the_base_is_the_build_arg_else_the_arg_default() -> None:
    text = f"# comment\nARG BASE_IMAGE={PREBUILT}\nFROM ${{BASE_IMAGE}}\nRUN true\n"
    assert base_image_arg(text, {}) == ("BASE_IMAGE", PREBUILT)
    assert base_image_arg(text, {"BASE_IMAGE": "python:3.11"}) == ("BASE_IMAGE", "python:3.11")
    assert base_image_arg("ARG B\nFROM --platform=linux/amd64 $B AS base\n", {"B": "x:1"}) == ("B", "x:1")


def test_a_literal_from_or_an_empty_argument_is_left_to_docker() -> None:
    assert base_image_arg("FROM python:3.11-slim\nARG BASE_IMAGE=x\n", {}) is None
    assert base_image_arg("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n", {}) is None
    assert base_image_arg("ARG A=x \\\n  \nFROM scratch\n", {}) is None


def test_an_unpullable_base_is_replaced_by_the_standin_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(standin, "image_present", lambda image, docker="docker": False)
    monkeypatch.setattr(standin, "can_pull", lambda image, docker="docker": False)
    monkeypatch.setattr(standin, "ensure_standin", lambda **_: made.append("made") or STANDIN_IMAGE)
    lines: list[str] = []
    text = f"ARG BASE_IMAGE={PREBUILT}\nFROM ${{BASE_IMAGE}}\n"
    args = local_build_args(text, {"PIP_REQUIREMENTS": "x"}, log=lines.append)
    assert args == {"PIP_REQUIREMENTS": "x", "BASE_IMAGE": STANDIN_IMAGE}
    assert made == ["made"] and len(lines) == 1
    assert lines[0].startswith(
        f"{PREBUILT} cannot be pulled here; building on the local stand-in {STANDIN_IMAGE}"
    )


def test_a_pullable_base_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standin, "image_present", lambda image, docker="docker": False)
    monkeypatch.setattr(standin, "can_pull", lambda image, docker="docker": True)
    lines: list[str] = []
    args = local_build_args(f"ARG BASE_IMAGE={PREBUILT}\nFROM ${{BASE_IMAGE}}\n", {}, log=lines.append)
    assert args == {} and lines == []
