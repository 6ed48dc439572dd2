"""`--help` in gcloud's words: `TEMPLATE`, `PATH...`, `--project PROJECT_ID`, `--procs-per-replica N`, never
typer's own type names (`{paths}...`, `<list[str]>`, `<int range>`).

Every command gets `HelpCommand` (set in one place, `use_for`), which names each value by what it is: a
metavar the command gives itself wins, then `METAVARS` below, then the parameter's name in capitals.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

# What each option's value is, as a user would write it.
METAVARS: dict[str, str] = {
    "paths": "PATH",
    "--project": "PROJECT_ID",
    "--location": "REGION",
    "--endpoint": "URL",
    "--transport": "grpc|rest",
    "--staging-bucket": "GS_URI",
    "--procs-per-replica": "N",
    "--out": "FOLDER",
    "--data-dir": "FOLDER",
    "--emulator-data-dir": "FOLDER",
    "--download": "FOLDER",
    "--timeout": "DURATION",
    "--since": "DURATION",
    "--grace": "SECONDS",
    "--hold-get": "SECONDS",
    "--step-compute": "TIME",
    "--resume-from": "JOB",
    "--seed": "N",
    "--limit": "N",
    "--trial": "TRIAL_ID",
    "--replica": "REPLICA",
    "--severity": "LEVEL",
    "--accelerator": "ACCELERATOR_TYPE",
    "--params": "COUNT",
    "--gradient-bytes": "SIZE",
    "--max-context-size": "SIZE",
    "--grad-dtype": "DTYPE",
    "--port": "PORT",
    "--gcs-port": "PORT",
}


def metavar(param: Any) -> str:
    """The name a parameter's value goes by in help: `TEMPLATE`, `PATH...`, `PROJECT_ID`."""
    if param.param_type_name == "option":
        longest = max(param.opts, key=len)
        return METAVARS.get(longest) or longest.lstrip("-").replace("-", "_").upper()
    name = METAVARS.get(param.name) or param.name.upper()
    return name + ("..." if param.nargs != 1 else "")


class HelpCommand(TyperCommand):
    """A command whose usage line and help name values by `metavar`, the way gcloud does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                continue
            if param.metavar is None:
                param.metavar = metavar(param)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or metavar(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                # typer adds the value's type after the name (`template <path>`): the name says it all.
                arguments.append((param.metavar or metavar(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def use_for(app: typer.Typer) -> None:
    """Give every command of `app` (and of its sub-apps) `HelpCommand`, unless it names its own class
    (typer fills in its own TyperCommand for those that name none)."""
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = HelpCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            use_for(group.typer_instance)
