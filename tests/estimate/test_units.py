"""Command-line numbers with units: what parses, and what a bad value is told."""

from __future__ import annotations

import pytest

from vertexdist.estimate import units


@pytest.mark.parametrize(
    ("text", "value"),
    [("350M", 350e6), ("1.3B", 1.3e9), ("1.3b", 1.3e9), ("7G", 7e9), ("125K", 125e3), ("350000000", 350e6),
     ("1.5e9", 1.5e9), ("1_300_000_000", 1.3e9), (" 2 T ", 2e12)],
)  # fmt: skip
def test_params(text: str, value: float) -> None:
    assert units.parse_params(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1.4GB", 1.4e9), ("700MB", 700e6), ("8GiB", 8 * 2**30), ("512MiB", 512 * 2**20), ("1400000000", 1.4e9),
     ("1.4G", 1.4e9), ("2tb", 2e12)],
)  # fmt: skip
def test_bytes(text: str, value: float) -> None:
    assert units.parse_bytes(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value"), [("120ms", 0.12), ("0.12s", 0.12), ("500us", 5e-4), ("1.5 s", 1.5), ("2min", 120.0)]
)
def test_durations(text: str, value: float) -> None:
    assert units.parse_duration_s(text) == pytest.approx(value)


def test_unknown_unit_names_value_forms_and_close_match() -> None:
    with pytest.raises(units.UnitError) as caught:
        units.parse_bytes("1.4GiG")
    assert "'1.4GiG' has an unknown unit 'GiG'" in str(caught.value)
    assert caught.value.hint.startswith("did you mean 1.4GiB? use a size like 1.4GB")
    with pytest.raises(units.UnitError) as caught:
        units.parse_duration_s("120mss")
    assert "did you mean 120ms?" in caught.value.hint


def test_not_a_number() -> None:
    with pytest.raises(units.UnitError) as caught:
        units.parse_params("lots")
    assert str(caught.value) == "'lots' is not a parameter count"
    assert caught.value.hint == f"use {units.PARAMS_FORMS}"


def test_bytes_given_as_params_point_to_gradient_bytes() -> None:
    with pytest.raises(units.UnitError) as caught:
        units.parse_params("1.3GB")
    assert "size in bytes" in str(caught.value) and caught.value.hint == "use --gradient-bytes 1.3GB"


def test_zero_and_bare_durations_are_refused() -> None:
    with pytest.raises(units.UnitError, match="more than zero"):
        units.parse_params("0M")
    with pytest.raises(units.UnitError) as caught:
        units.parse_duration_s("120")
    assert caught.value.hint == "write 120ms or 120s"


def test_grad_dtypes() -> None:
    assert [units.grad_bytes_per_param(d) for d in ("fp32", "BF16", "fp16")] == [4, 2, 2]
    with pytest.raises(units.UnitError) as caught:
        units.grad_bytes_per_param("bf61")
    assert caught.value.hint == "did you mean bf16? use one of fp32, bf16, fp16"


def test_formatting() -> None:
    assert units.format_count(1.3e9) == "1.3B" and units.format_count(350e6) == "350M"
    assert units.format_bytes(5.2e9) == "5.2 GB" and units.format_bytes(512) == "512 B"
    assert units.format_seconds(0.624) == "624 ms" and units.format_seconds(1.5) == "1.50 s"
    assert units.format_seconds(1.5e-4) == "150 us"
