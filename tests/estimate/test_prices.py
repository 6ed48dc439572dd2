"""The price table and its lookup: the derived Vertex prices match the Vertex figures read elsewhere."""

from __future__ import annotations

import pytest

from vertexdist.spec import prices
from vertexdist.spec.catalog_data import MACHINES, REGIONS
from vertexdist.spec.prices_data import (
    MACHINE_PRICES,
    QUOTED_VERTEX_PRICES,
    VERTEX_MANAGEMENT_FEE,
    QuotedPrice,
)


@pytest.mark.parametrize("quote", QUOTED_VERTEX_PRICES, ids=lambda q: q.machine_type)
def test_table_reproduces_quoted_vertex_prices(quote: QuotedPrice) -> None:
    price = prices.machine_price(quote.machine_type, quote.region)
    assert price is not None
    assert price.on_demand == pytest.approx(quote.usd_per_hour, rel=1e-5)


def test_n1_standard_4_is_the_quoted_figure_to_the_cent_fraction() -> None:
    price = prices.machine_price("n1-standard-4", "us-central1")
    assert price is not None and round(price.on_demand, 8) == 0.21849885


def test_spot_is_compute_engine_spot_plus_the_on_demand_fee() -> None:
    on_demand, spot = MACHINE_PRICES["n1-highcpu-16"]["us-central1"]
    price = prices.machine_price("n1-highcpu-16", "us-central1")
    assert price is not None
    assert price.on_demand == pytest.approx(on_demand * (1 + VERTEX_MANAGEMENT_FEE))
    assert price.spot == pytest.approx(spot + VERTEX_MANAGEMENT_FEE * on_demand)
    assert price.spot < price.on_demand


def test_no_price_is_none_not_a_guess() -> None:
    assert prices.machine_price("a3-ultragpu-8g", "us-central1") is None  # not in the source table
    assert prices.machine_price("a3-megagpu-8g", "us-central1") is None  # priced elsewhere only
    assert "us-east4" in prices.priced_regions("a3-megagpu-8g")
    assert prices.machine_price("n1-standard-4", "mars-north1") is None
    assert prices.disk_price_per_gb_hour("hyperdisk-balanced", "us-central1") is None


def test_pd_ssd_matches_the_billed_vertex_sku() -> None:
    # "Vertex AI: Training/Pipelines on SSD backed PD Capacity": $0.0002678 per GB-hour in Iowa.
    assert prices.disk_price_per_gb_hour("pd-ssd", "us-central1") == pytest.approx(0.0002678, rel=1e-3)


def test_table_rows_are_catalog_machines_and_regions_with_sane_prices() -> None:
    for machine, regions in MACHINE_PRICES.items():
        assert machine in MACHINES
        for region, (on_demand, spot) in regions.items():
            assert region in REGIONS
            assert 0 < spot < on_demand, (machine, region)


def test_source_line_names_date_and_source() -> None:
    line = prices.source_line()
    assert "2026-07-30" in line and "pricing.yml" in line and "15%" in line
