"""The template's `health.rendezvous_timeout` reaches torchrun, Ray and the bundled trainer (pure code)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainer_pkg.config import TrainConfig, parse_config
from vertexdist.shipped.vertexdist_launcher import health as watcher
from vertexdist.shipped.vertexdist_launcher import ray_mode, timeouts
from vertexdist.shipped.vertexdist_launcher.options import parse_launch_args
from vertexdist.shipped.vertexdist_launcher.torchrun_args import replica_torchrun_args
from vertexdist.spec.health import DEFAULT_RENDEZVOUS_TIMEOUT_S, HealthSpec

OPTIONS = parse_launch_args(["torchrun", "--", "-m", "user.task"])


def health_env(**fields: object) -> dict[str, str]:
    return {timeouts.HEALTH_VARIABLE: HealthSpec.model_validate(fields).env_value()}


def rdzv_conf(env: dict[str, str]) -> str:
    argv = replica_torchrun_args(env, OPTIONS, count_gpus=lambda: 0, free_port=lambda: 40123)
    assert argv is not None
    return argv[argv.index("--rdzv-conf") + 1]


def test_the_template_value_is_torchruns_join_timeout_rays_and_the_trainers() -> None:
    env = health_env(rendezvous_timeout="15m")
    assert rdzv_conf(env) == "timeout=900"
    assert ray_mode.join_timeout(env) == 900.0
    config, _ = parse_config([], env)
    assert config.rdzv_timeout == 900.0


def test_without_a_health_section_all_three_wait_the_default_ten_minutes() -> None:
    assert (
        DEFAULT_RENDEZVOUS_TIMEOUT_S
        == timeouts.DEFAULT_RENDEZVOUS_TIMEOUT_S
        == TrainConfig.rdzv_timeout
        == 600
    )
    assert DEFAULT_RENDEZVOUS_TIMEOUT_S >= 120 * 4  # a 120 s scattered start, with room for image pulls
    assert timeouts.HEALTH_VARIABLE == watcher.CONFIG_VARIABLE
    assert rdzv_conf({}) == "timeout=600"
    assert ray_mode.join_timeout({}) == 600.0
    assert parse_config([], {})[0].rdzv_timeout == 600.0
    assert '"rendezvous_timeout":600' in HealthSpec().env_value()


def test_explicit_settings_win_over_the_template() -> None:
    env = health_env(rendezvous_timeout=300)
    assert parse_config(["--rdzv-timeout=20"], env)[0].rdzv_timeout == 20.0
    assert ray_mode.join_timeout({**env, ray_mode.JOIN_TIMEOUT_VARIABLE: "45"}) == 45.0


@pytest.mark.parametrize(
    "bad", ["[1]", "not json", '{"rendezvous_timeout": "soon"}', '{"rendezvous_timeout": -3}']
)
def test_an_unreadable_value_falls_back_to_the_default(bad: str) -> None:
    assert timeouts.rendezvous_timeout_s({timeouts.HEALTH_VARIABLE: bad}) == 600


@pytest.mark.parametrize("bad", ["0s", "soon", True])
def test_a_bad_template_value_is_refused_naming_the_forms(bad: object) -> None:
    with pytest.raises(ValidationError, match="rendezvous_timeout"):
        HealthSpec.model_validate({"rendezvous_timeout": bad})
