"""Issue 34: `submit` of a template with `model:` registers the model the job trained; a second submit with
`parent_model` makes it version 2 of the same model, its artifactUri the job's own `.../model` folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vertexdist.emulator import Emulator

SERVING = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"
SAVES_A_MODEL = """\
import os, pathlib
folder = pathlib.Path(os.environ["AIP_MODEL_DIR"].replace("gs://", "/gcs/"))
folder.mkdir(parents=True, exist_ok=True)
(folder / "weights.txt").write_text("w")
"""


def _model_section(**fields: str) -> str:
    lines = "".join(f"  {key}: {value}\n" for key, value in fields.items())
    return f"model:\n  serving_container_image_uri: {SERVING}\n{lines}"


def test_submit_twice_makes_one_model_with_versions_1_and_2(
    emu: Emulator, cli: Any, write_template: Any, tmp_path: Path
) -> None:
    first = write_template(SAVES_A_MODEL, name="registered-v1", extra=_model_section(display_name="chapter"))
    code, out, err = cli("submit", str(first), "--follow")
    assert code == 0, err
    pipeline, versioned = out.splitlines()[0], out.splitlines()[-1]
    model_name, _, version = versioned.partition("@")
    assert version == "1" and f"registered model {model_name} version 1" in err
    output = emu.store.get(pipeline)["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"]
    v1 = emu.models.get(f"{model_name}@1")
    assert v1 is not None and v1["artifactUri"] == f"{output}/model"
    assert v1["displayName"] == "chapter" and v1["containerSpec"]["imageUri"] == SERVING

    second = write_template(
        SAVES_A_MODEL,
        name="registered-v2",
        extra=_model_section(parent_model=model_name.rsplit("/", 1)[1], version_aliases="[candidate]"),
    )
    code, out, err = cli("submit", str(second), "--follow")
    assert code == 0, err
    pipeline2, versioned2 = out.splitlines()[0], out.splitlines()[-1]
    assert versioned2 == f"{model_name}@2"
    output2 = emu.store.get(pipeline2)["trainingTaskInputs"]["baseOutputDirectory"]["outputUriPrefix"]
    versions = [
        (v["versionId"], v["artifactUri"], v["versionAliases"]) for v in emu.models.versions(model_name)
    ]
    assert versions == [
        ("1", f"{output}/model", []),
        ("2", f"{output2}/model", ["default", "candidate"]),
    ]
    assert [m["name"] for m in emu.store.list(model_name.rsplit("/models/", 1)[0], "models")].count(
        model_name
    ) == 1

    # `vertexdist models ...` reads the same registry.
    ident = model_name.rsplit("/", 1)[1]
    code, out, err = cli("models", "versions", model_name)
    assert code == 0, err
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["VERSION", "ALIASES"],
        ["1", "-"],
        ["2", "default,candidate"],
    ]
    code, out, err = cli("models", "describe", f"{ident}@1", "--project", "test-proj", "--json")
    assert code == 0, err
    assert json.loads(out)["artifactUri"] == f"{output}/model"
    code, out, err = cli("models", "describe", f"{model_name}@candidate")
    assert code == 0, err
    assert out.splitlines()[0] == f"{model_name}@2" and f"made by:      {pipeline2}" in out
    code, out, err = cli("models", "list", "--project", "test-proj", "--filter", f"model={ident}")
    assert code == 0, err
    assert out.splitlines()[1].split()[:4] == [ident, "chapter", "v2", "default,candidate"]
    code, _, err = cli("models", "download", f"{model_name}@1", "--to", str(tmp_path / "v1"))
    assert code == 0, err
    assert (tmp_path / "v1" / "weights.txt").read_text() == "w"
    code, _, err = cli("models", "describe", f"{model_name}@nope")
    assert code == 1 and "nope" in err


def test_a_trainer_that_saves_nothing_fails_the_pipeline_and_registers_no_model(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    # Issue 42, item 6: local-run refused the empty model folder, the emulator registered an empty model.
    saves_nothing = write_template(
        "print('trained, saved nothing')\n", name="saves-nothing", extra=_model_section()
    )
    code, out, err = cli("submit", str(saves_nothing), "--follow")
    assert code == 1, err
    pipeline = emu.store.get(out.splitlines()[0])
    assert pipeline["state"] == "PIPELINE_STATE_FAILED"
    message = pipeline["error"]["message"]
    assert "wrote nothing to its model folder" in message and "AIP_MODEL_DIR" in message, message
    assert "modelToUpload" not in pipeline or "versionId" not in pipeline["modelToUpload"]
