"""`models` and `experiments` with --emulator and no project find the project in the emulator's folder, as
`status ID --emulator` does (issue 42, item 1: the experiments guide's own `experiments runs lr-sweep
--emulator` said "no Google Cloud project given", with a hint to add the --emulator already there)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from vertexdist.jobs.registry_place import experiment_parents, model_parent, registry_parents
from vertexdist.jobs.where import JobPlace

DEMO = "projects/vertexdist-demo/locations/us-central1"
OTHER = "projects/other/locations/europe-west4"


def _write(folder: Path, collection: str, file: str, name: str) -> None:
    path = folder / "resources" / collection / f"{file}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name}))


def _experiment(folder: Path, name: str) -> None:
    _write(folder, "experiments", hashlib.sha256(name.encode()).hexdigest(), name)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "emulator"
    _write(folder, "models", "123", f"{DEMO}/models/123")
    _write(folder, "trainingPipelines", "9", f"{OTHER}/trainingPipelines/9")
    _experiment(folder, f"{DEMO}/metadataStores/default/contexts/lr-sweep")
    _experiment(folder, f"{DEMO}/metadataStores/default/contexts/lr-sweep-run-1")
    return folder


def test_the_folder_says_where_a_model_and_an_experiment_are(folder: Path) -> None:
    assert model_parent(folder, "123") == DEMO
    assert model_parent(folder, "456") is None
    assert experiment_parents(folder, "lr-sweep") == [DEMO]
    assert experiment_parents(folder, "nope") == []
    assert registry_parents(folder) == [OTHER, DEMO]  # models', experiments' and jobs' places


def test_with_a_project_named_the_folder_is_not_asked(folder: Path) -> None:
    from vertexdist.jobs.registry_place import model_places

    named = JobPlace(project="mine", emulator_dir=folder)
    assert model_places(named, {}, "123") == [named]
    from_env = JobPlace(emulator_dir=folder)
    assert model_places(from_env, {"GOOGLE_CLOUD_PROJECT": "env-project"}, "123") == [from_env]
    found = model_places(JobPlace(emulator_dir=folder), {}, "123")
    assert [(p.project, p.location) for p in found] == [("vertexdist-demo", "us-central1")]
    listed = model_places(JobPlace(emulator_dir=folder), {}, None)
    assert [p.project for p in listed] == ["other", "vertexdist-demo"]
    empty = model_places(JobPlace(emulator_dir=folder.parent / "none"), {}, None)
    assert [p.project for p in empty] == ["vertexdist-local"]  # the emulator's own project


def test_models_list_with_emulator_and_no_project_lists_the_folders_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vertexdist.cli import main

    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    folder = tmp_path / "emulator"
    model = {
        "name": f"{DEMO}/models/123",
        "displayName": "chapter",
        "versionId": "1",
        "versionAliases": ["default"],
        "createTime": "2026-01-01T00:00:00Z",
        "versionCreateTime": "2026-01-01T00:00:00Z",
        "artifactUri": "gs://b/m",
    }
    (folder / "resources" / "models").mkdir(parents=True)
    (folder / "resources" / "models" / "123.json").write_text(json.dumps(model))
    with pytest.raises(SystemExit) as ended:
        main.run(["models", "list", "--emulator", "--emulator-data-dir", str(folder)])
    out, err = capsys.readouterr()
    assert ended.value.code in (0, None), err
    assert out.splitlines()[1].split()[:3] == ["123", "chapter", "v1"], out
