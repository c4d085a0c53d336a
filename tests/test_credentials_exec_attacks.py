"""Attacks on the host's `sandbox.credentials` under the exec launchers (bubblewrap, Seatbelt) through a
whole call: a tool's YAML lets the variables through with an `env.allow` pattern and sets them with
`env.set`. bubblewrap is a stand-in that runs what follows its `--`, so the environment toolrt hands
over is exactly what the process sees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolrt import Runtime
from toolrt.sandbox import config as sandbox_config
from toolrt.sandbox.support import Support

TOOL = """id: runner
description: Prints its environment for the credential attack tests, with enough words here.
handler:
  argv: [env]
  env:
    allow: ["TOOLRT_ATK_*"]
    set: {TOOLRT_ATK_DENIED: set-by-yaml-1, TOOLRT_ATK_MASKED: set-by-yaml-2}
"""


def test_a_denied_and_a_masked_variable_reach_no_process_bwrap_starts(
    tmp_path: Path, make_project: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = tmp_path / "bwrap"
    stand_in.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    stand_in.chmod(0o755)
    support = Support(landlock_abi=0, mount_namespace=False, net_namespace=False, launch="exec", bwrap=str(stand_in))
    monkeypatch.setattr(sandbox_config, "detect_support", lambda: support)
    monkeypatch.setenv("TOOLRT_ATK_DENIED", "s3cret-denied")
    monkeypatch.setenv("TOOLRT_ATK_MASKED", "s3cret-masked")
    monkeypatch.setenv("TOOLRT_ATK_PLAIN", "plain-value")
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "toolrt" / "settings.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(
        "sandbox:\n  credentials:\n    - {env: TOOLRT_ATK_DENIED}\n"
        "    - {env: TOOLRT_ATK_MASKED, action: mask, host: api.example.com}\n"
    )
    assert callable(make_project)
    rt = Runtime.load(make_project({"runner": TOOL}))
    try:
        result = rt.call_sync("runner", {})
    finally:
        rt.close()
    output = result.output
    assert "TOOLRT_ATK_PLAIN=plain-value" in output, output  # the pattern lets variables through
    assert "s3cret" not in output and "set-by-yaml" not in output, output
    assert "TOOLRT_ATK_DENIED" not in output, output
    assert "TOOLRT_ATK_MASKED=toolrt-masked-toolrt_atk_masked-" in output, output
