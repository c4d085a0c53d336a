"""One settings model: CLI > environment > user file > project .env > toolrt.yaml > default, per setting;
host-only settings never come from the project's files."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolrt import Runtime
from toolrt.config.document import Document
from toolrt.config.layers import read_single
from toolrt.config.model import FlagDef
from toolrt.config.settings import CommandLineSettings, ResolvedSettings, resolve_settings
from toolrt.errors import ConfigError, Problem, UsageError
from toolrt.faces.cli import main

Factory = Callable[..., Path]


def _project_data(key: str, value: Any) -> dict[str, Any]:
    """`toolrt.yaml` with `key` set where the project file keeps it."""
    if key == "locked_permissions":
        return {"locked_permissions": value}
    if key.startswith("serve."):
        return {"serve": {key[6:]: value}}
    if key.startswith("truncate."):
        return {"defaults": {"truncate": {key[9:]: value}}}
    return {"defaults": {key: value}}


def _nested(key: str, value: Any) -> dict[str, Any]:
    head, _, rest = key.partition(".")
    return {head: _nested(rest, value) if rest else value}


def _env_name(key: str) -> str:
    return "TOOLRT_" + key.replace(".", "__").upper()


class Layers:
    """A project root, a user settings file and an environment, written one layer at a time."""

    def __init__(self, base: Path) -> None:
        self.root = base / "project"
        self.root.mkdir()
        self.user_file = base / "config" / "toolrt" / "settings.yaml"
        self.environ: dict[str, str] = {}
        self.cli = CommandLineSettings()
        self.declared: dict[str, FlagDef] = {}

    def project_yaml(self, data: dict[str, Any]) -> None:
        (self.root / "toolrt.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")

    def dotenv(self, text: str) -> None:
        (self.root / ".env").write_text(text, encoding="utf-8")

    def user(self, data: dict[str, Any]) -> None:
        self.user_file.parent.mkdir(parents=True, exist_ok=True)
        self.user_file.write_text(yaml.safe_dump(data), encoding="utf-8")

    def document(self) -> Document | None:
        problems: list[Problem] = []
        document = read_single(self.root / "toolrt.yaml", "project", problems)
        assert problems == []
        return document

    def resolve(self) -> ResolvedSettings:
        return resolve_settings(
            self.root,
            project=self.document(),
            declared_flags=self.declared,
            cli=self.cli,
            environ=self.environ,
            user_file=self.user_file,
        )


@pytest.fixture
def layers(tmp_path: Path) -> Layers:
    return Layers(tmp_path)


def _value(resolved: ResolvedSettings, key: str) -> tuple[Any, str]:
    found = {k: (v, origin) for k, v, origin in resolved.items()}
    return found[key]


# Each ordinary setting: the value each layer sets (project toolrt.yaml, .env text, user file, environment
# text, command line) and the effective value expected after that layer is added.
ORDINARY: dict[str, list[tuple[Any, Any, Any]]] = {
    "timeout": [(10, "10", 10.0), (20, "20", 20.0), (30, "30", 30.0), (40, "40", 40.0), (50, 50.0, 50.0)],
    "truncate.max_lines": [(11, "11", 11), (12, "12", 12), (13, "13", 13), (14, "14", 14), (15, 15, 15)],
    "truncate.max_bytes": [(101, "101", 101), (102, "102", 102), (103, "103", 103), (104, "104", 104), (105, 105, 105)],
    "truncate.direction": [
        ("tail", "tail", "tail"),
        ("head", "head", "head"),
        ("tail", "tail", "tail"),
        ("head", "head", "head"),
        ("tail", "tail", "tail"),
    ],
    "env_allow": [
        (["A"], '["A"]', ("A",)),
        (["B"], '["B"]', ("B",)),
        (["C"], '["C"]', ("C",)),
        (["D"], '["D","E"]', ("D", "E")),
        (["F"], ("F",), ("F",)),
    ],
    "serve.port": [
        (1001, "1001", 1001),
        (1002, "1002", 1002),
        (1003, "1003", 1003),
        (1004, "1004", 1004),
        (1005, 1005, 1005),
    ],
    "serve.host": [
        ("127.0.0.2", "::1", "127.0.0.2"),
        ("localhost", "::1", "::1"),
        ("10.0.0.3", "10.0.0.3", "10.0.0.3"),
        ("10.0.0.4", "10.0.0.4", "10.0.0.4"),
        ("10.0.0.5", "10.0.0.5", "10.0.0.5"),
    ],
}


@pytest.mark.parametrize("key", sorted(ORDINARY))
def test_each_setting_follows_the_precedence(layers: Layers, key: str) -> None:
    steps = ORDINARY[key]
    default_value, origin = _value(layers.resolve(), key)
    assert origin == "default"

    layers.project_yaml(_project_data(key, steps[0][0]))
    value, origin = _value(layers.resolve(), key)
    assert (value, origin.split(":")[0]) == (steps[0][2], "toolrt.yaml")

    layers.dotenv(f"# project secrets and settings\nOTHER=1\n{_env_name(key)}={steps[1][1]}\n")
    assert _value(layers.resolve(), key) == (steps[1][2], ".env:3")

    layers.user(_nested(key, steps[2][0]))
    value, origin = _value(layers.resolve(), key)
    assert (value, origin) == (steps[2][2], f"{layers.user_file}:{1 + key.count('.')}")

    layers.environ[_env_name(key)] = str(steps[3][1])
    assert _value(layers.resolve(), key) == (steps[3][2], f"environment {_env_name(key)}")

    layers.cli = CommandLineSettings(values={key: steps[4][1]})
    assert _value(layers.resolve(), key) == (steps[4][2], "command line")
    assert layers.resolve().ignored == ()


HOST_ONLY: dict[str, tuple[str, str, Any]] = {
    "data_dir": ("/p/data", "/e/data", Path("/e/data")),
    "audit": ("/p/audit.jsonl", "off", False),
    "locked_permissions": ("/p/locked.yaml", "/e/locked.yaml", Path("/e/locked.yaml")),
}


@pytest.mark.parametrize("key", sorted(HOST_ONLY))
def test_host_only_settings_come_only_from_the_host(layers: Layers, key: str) -> None:
    project_value, env_value, env_expected = HOST_ONLY[key]
    default_value, _ = _value(layers.resolve(), key)
    layers.project_yaml(_project_data(key, project_value))
    layers.dotenv(f"{_env_name(key)}={project_value}\n")
    resolved = layers.resolve()
    assert _value(resolved, key) == (default_value, "default")
    assert [(i.key, i.value, i.origin.split(":")[0]) for i in resolved.ignored] == [
        (key, project_value, ".env"),
        (key, project_value, "toolrt.yaml"),
    ]
    assert all(f"{key} is a host-only setting: a project file may not set it" in i.reason for i in resolved.ignored)
    warnings = [(w.file, w.severity) for w in resolved.warnings]
    assert warnings == [(".env", "warning"), ("toolrt.yaml", "warning")]
    assert all(w.line > 0 for w in resolved.warnings)

    layers.user({key: "user-value"})
    value, origin = _value(layers.resolve(), key)
    assert (value, origin) == (layers.user_file.parent / "user-value", f"{layers.user_file}:1")

    layers.environ[_env_name(key)] = env_value
    assert _value(layers.resolve(), key) == (env_expected, f"environment {_env_name(key)}")

    layers.cli = CommandLineSettings(values={key: "/c/value"})
    assert _value(layers.resolve(), key) == (Path("/c/value"), "command line")


def test_a_project_may_serve_on_loopback_only(layers: Layers) -> None:
    layers.project_yaml({"serve": {"host": "0.0.0.0", "port": 9000}})
    resolved = layers.resolve()
    assert resolved.values.serve.host == "127.0.0.1"
    assert resolved.values.serve.port == 9000
    assert [i.key for i in resolved.ignored] == ["serve.host"]
    layers.project_yaml({"serve": {"host": "::1"}})
    assert layers.resolve().values.serve.host == "::1"


def test_flags_follow_the_precedence(layers: Layers) -> None:
    layers.declared = {"beta": FlagDef("beta", "Beta.", default=False, stage="beta", source="toolrt.yaml:3")}
    assert layers.resolve().flags["beta"] is False
    assert _value(layers.resolve(), "flags.beta") == (False, "toolrt.yaml:3")
    layers.dotenv("TOOLRT_FLAG_BETA=true\n")
    assert _value(layers.resolve(), "flags.beta") == (True, ".env:1")
    layers.user({"flags": {"beta": False, "elsewhere": True}})  # another project's flag is no error here
    assert _value(layers.resolve(), "flags.beta") == (False, f"{layers.user_file}:2")
    layers.environ["TOOLRT_FLAG_BETA"] = "yes"
    assert _value(layers.resolve(), "flags.beta") == (True, "environment TOOLRT_FLAG_BETA")
    layers.cli = CommandLineSettings(flags={"beta": False})
    assert _value(layers.resolve(), "flags.beta") == (False, "command line")
    layers.cli = CommandLineSettings(flags={"bta": True})
    with pytest.raises(UsageError, match=r"unknown flag 'bta' \(declared flags: beta\)"):
        layers.resolve()


def test_a_value_of_the_wrong_type_is_located(layers: Layers) -> None:
    layers.environ["TOOLRT_TIMEOUT"] = "soon"
    with pytest.raises(ConfigError, match=r"environment TOOLRT_TIMEOUT: timeout: Input should be a valid number"):
        layers.resolve()


def test_the_user_file_is_checked_against_its_schema(layers: Layers) -> None:
    layers.user({"timeout": 5, "data_dri": "/x"})
    with pytest.raises(ConfigError, match=r"settings.yaml:1:1: .*data_dri"):
        layers.resolve()


def test_only_toolrt_variables_of_dotenv_are_read(layers: Layers) -> None:
    layers.dotenv("API_KEY=secret\nTOOLRT_TIMEOUT=7\n")
    resolved = layers.resolve()
    assert resolved.values.timeout == 7.0
    assert "secret" not in json.dumps([[k, str(v), o] for k, v, o in resolved.items()])


# --- end to end -------------------------------------------------------------------------------------


def test_a_project_data_dir_is_ignored_with_a_located_warning(make_project: Factory, tmp_path: Path) -> None:
    root = make_project(settings=f"defaults:\n  data_dir: {tmp_path / 'model-chosen'}\n  timeout: 9\n")
    rt = Runtime.load(root)
    assert rt.snapshot.data_dir != tmp_path / "model-chosen"
    assert rt.settings.values.timeout == 9.0
    warning = next(w for w in rt.snapshot.warnings if "host-only" in w.message)
    assert (warning.file, warning.line, warning.pointer) == ("toolrt.yaml", 3, "/defaults/data_dir")


def test_the_user_file_sets_the_data_dir(
    make_project: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLRT_DATA_DIR")
    config = tmp_path / "xdg"
    (config / "toolrt").mkdir(parents=True)
    (config / "toolrt" / "settings.yaml").write_text(f"data_dir: {tmp_path / 'mine'}\n", encoding="utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    rt = Runtime.load(make_project())
    assert rt.snapshot.data_dir == tmp_path / "mine"
    assert rt.audit.path == tmp_path / "mine" / "audit.jsonl"


def test_toolrt_settings_shows_each_origin(make_project: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(settings="defaults:\n  timeout: 9\n  audit: false\n")
    (root / ".env").write_text("TOOLRT_TRUNCATE__MAX_LINES=77\n", encoding="utf-8")
    monkeypatch.setenv("TOOLRT_SERVE__PORT", "9999")
    out = io.StringIO()
    assert main(["settings", "--root", str(root), "--data-dir", str(root / "d")], out=out) == 0
    lines = out.getvalue().splitlines()
    assert any(line.startswith("command line") and line.endswith(f"data_dir={root / 'd'}") for line in lines)
    assert any(line.startswith("toolrt.yaml:3") and line.endswith("timeout=9.0") for line in lines)
    assert any(line.startswith(".env:1") and line.endswith("truncate.max_lines=77") for line in lines)
    assert any(line.startswith("environment TOOLRT_SERVE__PORT") and line.endswith("serve.port=9999") for line in lines)
    assert any(line.startswith("default") and line.endswith("audit=True") for line in lines)
    assert any(line.startswith("ignored: toolrt.yaml:4  audit=False  (audit is a host-only setting") for line in lines)
    out = io.StringIO()
    assert main(["settings", "--root", str(root), "--json"], out=out) == 0
    document = json.loads(out.getvalue())
    assert document["settings"]["timeout"] == {"value": 9.0, "origin": "toolrt.yaml:3"}
    assert document["ignored"][0]["key"] == "audit"


# --- the locked file's `settings:` section ----------------------------------------------------------

# Each lockable setting: the locked file's value, the value every other layer sets, and the locked value
# as the effective setting.
LOCKED: dict[str, tuple[Any, str, Any]] = {
    "data_dir": ("/l/data", "/x/data", Path("/l/data")),
    "audit": (False, "/x/audit.jsonl", False),
    "serve.host": ("10.0.0.9", "10.0.0.8", "10.0.0.9"),
}


def _locked(layers: Layers, section: dict[str, Any], *, via: str = "environment") -> Path:
    path = layers.root.parent / "admin" / "locked.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"permission": {"bash": "ask"}, "settings": section}), encoding="utf-8")
    if via == "environment":
        layers.environ["TOOLRT_LOCKED_PERMISSIONS"] = str(path)
    else:
        layers.user({"locked_permissions": str(path)})
    return path


def test_the_lockable_settings_are_host_only_ones_and_the_schema_names_each() -> None:
    from toolrt.config.resources import schema
    from toolrt.config.settings import LOCKABLE, host_only_guard

    assert set(LOCKABLE) == {"data_dir", "audit", "serve.host"} == set(LOCKED)
    assert all(host_only_guard(key) is not None for key in LOCKABLE)
    section = schema("permissions")["properties"]["settings"]
    named = {key for key, value in section["properties"].items() if "$ref" in value} | {
        f"serve.{key}" for key in section["properties"]["serve"]["properties"]
    }
    assert named == set(LOCKABLE)


@pytest.mark.parametrize("key", sorted(LOCKED))
@pytest.mark.parametrize("via", ["environment", "user file"])
def test_a_locked_setting_beats_every_layer(layers: Layers, key: str, via: str) -> None:
    locked_value, other, expected = LOCKED[key]
    path = _locked(layers, _nested(key, locked_value), via=via)
    layers.user_file.parent.mkdir(parents=True, exist_ok=True)
    if via == "user file":
        layers.user({"locked_permissions": str(path), **_nested(key, other)})
    else:
        layers.user(_nested(key, other))
        layers.environ[_env_name(key)] = other
    layers.project_yaml(_project_data(key, other))
    layers.cli = CommandLineSettings(values={key: other})
    resolved = layers.resolve()
    value, origin = _value(resolved, key)
    line = 1 + key.count(".") + (1 if key == "serve.host" else 0)
    assert value == expected
    assert origin.startswith(f"locked {path}:") and int(origin.rsplit(":", 1)[1]) >= line - 1, origin
    overridden = [(i.origin.split(":")[0], i.reason) for i in resolved.ignored if i.key == key]
    fixed = f"{key} is fixed by the locked file ({origin}), which beats every other source"
    assert ("command line", fixed) in overridden
    assert (str(layers.user_file), fixed) in overridden
    if via == "environment":
        assert (f"environment {_env_name(key)}", fixed) in overridden
    if key != "serve.host" or other not in ("127.0.0.1", "::1"):  # a project's non-loopback host: refused
        assert any(o == "toolrt.yaml" and "host-only" in r for o, r in overridden)


def test_a_relative_locked_path_is_relative_to_the_locked_file(layers: Layers) -> None:
    path = _locked(layers, {"data_dir": "data", "audit": "logs/audit.jsonl"})
    values = layers.resolve().values
    assert values.data_dir == path.parent / "data"
    assert values.audit_path == path.parent / "logs" / "audit.jsonl"


def test_without_a_settings_section_the_locked_file_changes_no_setting(layers: Layers) -> None:
    path = layers.root.parent / "locked.yaml"
    path.write_text("permission:\n  bash: deny\n", encoding="utf-8")
    layers.environ["TOOLRT_LOCKED_PERMISSIONS"] = str(path)
    layers.environ["TOOLRT_DATA_DIR"] = "/e/data"
    resolved = layers.resolve()
    assert _value(resolved, "data_dir") == (Path("/e/data"), "environment TOOLRT_DATA_DIR")
    assert resolved.ignored == ()


def test_a_locked_value_of_the_wrong_type_is_located_in_the_locked_file(make_project: Factory, tmp_path: Path) -> None:
    locked = tmp_path / "locked.yaml"
    locked.write_text("settings:\n  audit: 3\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"locked\.yaml:2:3: expected true or false or a string, found a number \(3\)"
    ):
        _load_locked(make_project(), locked)


def _load_locked(root: Path, locked: Path) -> Runtime:
    return Runtime.load(root, settings={"locked_permissions": str(locked)})


@pytest.mark.parametrize(
    ("where", "text"),
    [("permissions.yaml", "settings:\n  audit: false\n"), ("locked.yaml", "settings:\n  timeout: 5\n")],
    ids=["in-a-project-permissions-file", "an-ordinary-setting"],
)
def test_the_settings_section_is_the_locked_files_and_holds_only_lockable_keys(
    make_project: Factory, tmp_path: Path, where: str, text: str
) -> None:
    root = make_project()
    locked = tmp_path / "locked.yaml"
    locked.write_text("permission:\n  bash: ask\n", encoding="utf-8")
    (root / where if where == "permissions.yaml" else locked).write_text(text, encoding="utf-8")
    expected = '"settings" belongs in the locked file' if where == "permissions.yaml" else "timeout"
    with pytest.raises(ConfigError, match=expected):
        _load_locked(root, locked)


def test_a_locked_audit_and_data_dir_reach_the_runtime_and_toolrt_settings(
    make_project: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(builtin_tools=True)
    (root / "notes.txt").write_text("x\n", encoding="utf-8")
    locked = tmp_path / "admin" / "locked.yaml"
    locked.parent.mkdir()
    locked.write_text(
        'permission:\n  "*": allow\nsettings:\n  data_dir: state\n  audit: audit/central.jsonl\n', encoding="utf-8"
    )
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    rt = Runtime.load(root, settings={"audit": False})
    assert rt.snapshot.data_dir == locked.parent / "state"
    assert rt.call_sync("read", {"filePath": "notes.txt"}).error is None
    assert (locked.parent / "audit" / "central.jsonl").read_text(encoding="utf-8").count("\n") == 1
    out = io.StringIO()
    assert main(["settings", "--root", str(root), "--audit", "off"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert f"locked {locked}:4 data_dir={locked.parent / 'state'}" in [" ".join(line.split()) for line in lines]
    assert any(line.startswith(f"locked {locked}:5") and line.endswith("central.jsonl") for line in lines)
    assert any(
        line.startswith("ignored: command line  audit=off  (audit is fixed by the locked file") for line in lines
    ), lines
    out = io.StringIO()
    assert main(["settings", "--root", str(root), "--json"], out=out) == 0
    document = json.loads(out.getvalue())
    assert document["settings"]["data_dir"] == {"value": str(locked.parent / "state"), "origin": f"locked {locked}:4"}
