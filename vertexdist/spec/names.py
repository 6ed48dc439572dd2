"""Names the templates and the requests share: the SDK's package of a single script, the bundled trainer."""

from __future__ import annotations

SCRIPT_PACKAGE = "aiplatform_custom_trainer_script"  # the SDK's package name for a single script
BUNDLED_TRAINER = "trainer_pkg"
