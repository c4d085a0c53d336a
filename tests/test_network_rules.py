"""`network:` names (issue 31 items 1 and 4): what an entry matches, how the host's, the locked file's and
the project's lists combine (a project only narrows), the presets, and `toolrt init`'s offer of them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from toolrt import Runtime
from toolrt.errors import ConfigError
from toolrt.faces.init import write_starter
from toolrt.sandbox.config import sandbox_status
from toolrt.sandbox.netrules import PRESETS, NetworkRules, entry_problem, expand
from toolrt.sandbox.policy import SandboxLayer, loosening, merge_tighter
from toolrt.sandbox.support import detect_support


def _allowed(rules: NetworkRules, host: str, port: int) -> bool:
    return rules.decide(host, port).allowed


def test_an_entry_matches_its_name_and_the_web_ports_unless_it_names_one() -> None:
    rules = NetworkRules((("pypi.org", "github.com:22", "*.npmjs.org", "internal.test:*"),))
    assert _allowed(rules, "pypi.org", 443) and _allowed(rules, "PyPI.org.", 80)
    assert not _allowed(rules, "pypi.org", 22) and not _allowed(rules, "files.pypi.org", 443)
    assert _allowed(rules, "github.com", 22) and not _allowed(rules, "github.com", 443)
    assert _allowed(rules, "registry.npmjs.org", 443) and not _allowed(rules, "npmjs.org", 443)
    assert not _allowed(rules, "evilnpmjs.org", 443)
    assert _allowed(rules, "internal.test", 5432)
    assert rules.decide("pypi.org", 22).rule == "not on that port (host list)"
    assert rules.decide("example.org", 443).rule == "not in the allow list (host list)"


def test_only_an_exact_name_of_the_host_list_may_reach_a_private_address() -> None:
    rules = NetworkRules((("registry.internal", "*.corp.test"),))
    assert rules.decide("registry.internal", 443).named
    verdict = rules.decide("a.corp.test", 443)
    assert verdict.allowed and not verdict.named
    narrowed = NetworkRules((("*.corp.test",), ("a.corp.test",)))
    assert not narrowed.decide("a.corp.test", 443).named  # the project's exact name does not lift it


@pytest.mark.parametrize("spelling", ["127.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "017700000001"])
def test_an_ip_literal_is_matched_as_the_address_whatever_its_spelling(spelling: str) -> None:
    assert _allowed(NetworkRules((("127.0.0.1:8080",),)), spelling, 8080)
    assert not _allowed(NetworkRules((("pypi.org",),)), spelling, 443)
    assert _allowed(NetworkRules((("[::1]:8080",),)), "[::1]", 8080)
    assert _allowed(NetworkRules((("::ffff:7f00:1",),)), "[::ffff:127.0.0.1]", 443)


def test_deny_wins_and_every_list_must_allow() -> None:
    rules = NetworkRules((("*.pythonhosted.org", "pypi.org"),)).narrowed(("pypi",), ("upload.pythonhosted.org",))
    assert rules.allow[1] == PRESETS["pypi"]
    assert _allowed(rules, "files.pythonhosted.org", 443)
    assert rules.decide("upload.pythonhosted.org", 443).rule == "deny: upload.pythonhosted.org"
    assert rules.decide("x.pythonhosted.org", 443).rule == "not in the allow list (narrowed list)"
    assert not _allowed(NetworkRules(()), "pypi.org", 443)


def test_presets_expand_and_bad_entries_are_named() -> None:
    assert expand(["github", "pypi.org", "pypi"]) == (*PRESETS["github"], "pypi.org", "files.pythonhosted.org")
    assert set(PRESETS) == {"pypi", "npm", "crates", "go", "github"}
    assert entry_problem("pypi") is None and entry_problem("*.npmjs.org:443") is None
    assert entry_problem("pypi.org:70000") == "'pypi.org:70000' has no valid port (1-65535, or *)"
    assert entry_problem("*") == (
        "'*' is not a host name, '*.' and a domain, or an IP address (with an optional :port)"
    )
    assert entry_problem("a.*.org") is not None


def test_the_project_narrows_the_host_list_and_cannot_widen_it(tmp_path: Path) -> None:
    host = SandboxLayer(network=False, allow=("pypi", "github.com"), source="host")
    policy, warnings = merge_tighter(host, None)
    assert warnings == [] and policy.network is False
    assert policy.network_rules == NetworkRules(((*PRESETS["pypi"], "github.com"),))
    project = SandboxLayer(network=False, allow=("pypi.org", "evil.test"))
    narrowed = policy.tightened(project, root=tmp_path)
    assert narrowed.network_rules is not None
    assert _allowed(narrowed.network_rules, "pypi.org", 443)
    assert not _allowed(narrowed.network_rules, "evil.test", 443)  # not the host's
    assert not _allowed(narrowed.network_rules, "github.com", 443)  # not the project's
    off = policy.tightened(SandboxLayer(network=False), root=tmp_path)
    assert off.network is False and off.network_rules is None
    assert loosening(policy, SandboxLayer(network=True), root=tmp_path)[0][0] == "network"
    closed, _ = merge_tighter(SandboxLayer(network=False), None)
    assert loosening(closed, project, root=tmp_path) == [
        (
            "network",
            "sandbox network names hosts, but the network is off: a project may only narrow the host's list; "
            "name the hosts on the host (sandbox.network.allow in the user settings file)",
        )
    ]
    assert closed.tightened(project, root=tmp_path).network_rules is None


def test_names_narrow_an_open_network_and_the_locked_file_widens_or_closes(tmp_path: Path) -> None:
    open_policy, _ = merge_tighter(SandboxLayer(), None)
    narrowed = open_policy.tightened(SandboxLayer(network=False, allow=("npm",)), root=tmp_path)
    assert narrowed.network is False and narrowed.network_rules == NetworkRules((PRESETS["npm"],))
    host = SandboxLayer(network=False, allow=("pypi.org",), deny=("evil.test",), source="host")
    widened, _ = merge_tighter(host, SandboxLayer(network=False, allow=("crates.io",)))
    assert widened.network_rules == NetworkRules((("pypi.org", "crates.io"),), ("evil.test",))
    closed, _ = merge_tighter(host, SandboxLayer(network=False))
    assert closed.network is False and closed.network_rules is None
    status = sandbox_status(widened, detect_support())
    assert "network: 2 allowed names through toolrt's proxy" in status or not detect_support().net_namespace


def test_the_project_file_and_the_host_environment_read_names(
    tmp_path: Path, make_project: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = "id: runner\ndescription: Runs a fixed command for the network rule tests, with enough words.\n"
    tool += "handler: {argv: [echo, hi]}\n"
    factory = make_project
    assert callable(factory)
    root = factory({"runner": tool}, settings="sandbox:\n  network: {allow: [pypi, 'github.com:443']}\n")
    monkeypatch.setenv("TOOLRT_SANDBOX__NETWORK", '{"allow": ["github"], "deny": ["api.github.com"]}')
    rt = Runtime.load(root)
    try:
        rules = rt.snapshot.sandbox.network_rules
    finally:
        rt.close()
    assert rules == NetworkRules((PRESETS["github"], (*PRESETS["pypi"], "github.com:443")), ("api.github.com",))
    bad = factory({"runner": tool}, settings="sandbox:\n  network: {allow: ['pypi.org:0']}\n")
    with pytest.raises(ConfigError, match=r"sandbox.network.allow: 'pypi.org:0' has no valid port"):
        Runtime.load(bad)
    slashed = factory({"runner": tool}, settings="sandbox:\n  network: {allow: ['https://pypi.org/']}\n")
    with pytest.raises(ConfigError, match="does not match the pattern"):
        Runtime.load(slashed)


def test_init_offers_the_presets_and_they_load(tmp_path: Path) -> None:
    write_starter(tmp_path)
    text = (tmp_path / "toolrt.yaml").read_text()
    assert "  #   pypi: pypi.org, files.pythonhosted.org\n" in text
    uncommented = text.replace("  network: false\n", "").replace("  # network:\n", "  network:\n")
    uncommented = uncommented.replace("  #   allow: [pypi,", "    allow: [pypi,")
    (tmp_path / "toolrt.yaml").write_text(uncommented)
    rt = Runtime.load(tmp_path)
    try:
        rules = rt.snapshot.sandbox.network_rules
    finally:
        rt.close()
    assert rules is not None and rules.allow == ((*(h for name in PRESETS for h in PRESETS[name]),),)
    assert _allowed(rules, "files.pythonhosted.org", 443) and _allowed(rules, "index.crates.io", 443)


def test_credentials_are_a_host_setting(tmp_path: Path, make_project: object) -> None:
    import os

    from toolrt.sandbox.credentials import Credential

    tool = "id: runner\ndescription: Runs a fixed command for the credential setting tests, with enough words.\n"
    tool += "handler: {argv: [echo, hi]}\n"
    factory = make_project
    assert callable(factory)
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "toolrt" / "settings.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(
        "sandbox:\n  credentials:\n    - {env: GITHUB_TOKEN, action: mask, host: api.github.com}\n"
        "    - {env: AWS_SECRET_ACCESS_KEY}\n"
        "    - {file: /nonexistent/credentials}\n"
        "    - {file: /nonexistent/token, action: mask, host: api.github.com, header: X-Token}\n"
    )
    try:
        rt = Runtime.load(factory({"runner": tool}))
        try:
            found = rt.snapshot.sandbox.credentials
        finally:
            rt.close()
    finally:
        user.unlink()
    assert found == (
        Credential("GITHUB_TOKEN", "mask", "api.github.com", "Authorization"),
        Credential("AWS_SECRET_ACCESS_KEY", "deny", "", "Authorization"),
        Credential("", "deny", "", "Authorization", "/nonexistent/credentials"),
        Credential("", "mask", "api.github.com", "X-Token", "/nonexistent/token"),
    )
    project = factory({"runner": tool}, settings="sandbox:\n  credentials: [{env: GITHUB_TOKEN}]\n")
    with pytest.raises(ConfigError, match="credentials"):
        Runtime.load(project)


def test_the_machines_own_addresses_are_every_interfaces_not_only_its_names() -> None:
    """A wildcard-allowed name resolving to an address of one of this machine's interfaces would reach
    its listeners bound to every address: the proxy's list of its own addresses is the kernel's, every
    interface included (before: only what the host name resolved to)."""
    from toolrt.sandbox import proxy

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: the kernel picks the outgoing interface's address
        outgoing = probe.getsockname()[0]
    own = proxy._own_addresses()
    assert {"127.0.0.1", "::1", outgoing} <= own
