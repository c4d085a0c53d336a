"""Shared fixtures: a throwaway project factory and a data directory that never touches the home directory.

No test reads or writes the person's own toolrt directories: before anything is collected,
`pytest_configure` points `TOOLRT_DATA_DIR` and the XDG directories at a temporary tree (so
module-scoped fixtures and collection-time code are covered too, not only tests), and an audit
hook records every write under the real ones; a session that made one fails.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from toolrt.config.settings import default_data_dir, user_settings_file
from toolrt.permissions.model import CallSite

ProjectFactory = Callable[..., Path]

_XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class HomeGuard:
    """The real toolrt directories of the person running the tests, and the writes seen under them."""

    def __init__(self) -> None:
        # A pytest-xdist worker inherits the temporary tree its controller set up: the person's own
        # values are the ones the controller saw first.
        original = os.environ.get(_ORIGINAL)
        environment = json.loads(original) if original else {key: os.environ.get(key) for key in _SAVED}
        os.environ[_ORIGINAL] = json.dumps(environment)
        with _environment(environment):
            own = [Path(environment[key] or "") for key in ("TOOLRT_DATA_DIR",) if environment.get(key)]
            homes = [default_data_dir(), user_settings_file().parent, Path.home() / ".cache" / "toolrt", *own]
        self.watched = tuple(str(path.absolute()) + os.sep for path in homes)
        self.writes: list[str] = []
        self.armed = False

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        """A `sys.addaudithook` hook: an `open` for writing, or a new directory, under a watched one."""
        if not self.armed or (event != "open" and event != "os.mkdir"):
            return
        path = args[0]
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor
        text = os.fsdecode(path)
        if event == "open":
            mode, flags = args[1], args[2]
            writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & _WRITE_FLAGS)
            if not writes:
                return
        text = os.path.abspath(text)
        if (text + os.sep).startswith(self.watched):
            self.writes.append(f"{event} {text}")


_SAVED = ("TOOLRT_DATA_DIR", *_XDG)
_ORIGINAL = "_TOOLRT_TESTS_ORIGINAL_ENVIRONMENT"
"""Where the first pytest process of a run keeps the person's own values of `_SAVED` for its workers."""


@contextlib.contextmanager
def _environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """`os.environ` with `values` (None: unset) for the duration of a `with`."""
    before = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            _set(key, value)
        yield
    finally:
        for key, value in before.items():
            _set(key, value)


def _set(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


HOME_GUARD = HomeGuard()


def pytest_configure(config: pytest.Config) -> None:
    """The environment every test (and every process a test starts) inherits: a temporary data directory
    and XDG tree instead of the person's own."""
    if getattr(config.option, "maxschedchunk", 0) is None:
        # pytest-xdist's `load` scheduling hands out one test at a time (two queued per worker), the
        # longest first (see `pytest_collection_modifyitems`), instead of whole consecutive chunks:
        # a chunk of long tests left one worker running minutes after the other ran out.
        config.option.maxschedchunk = 1
    if HOME_GUARD.armed:
        return
    tree = Path(tempfile.mkdtemp(prefix="toolrt-tests-"))
    config.stash[_TREE] = tree
    for name in _XDG:
        os.environ[name] = str(tree / name.lower())
    os.environ["TOOLRT_DATA_DIR"] = str(tree / "data")
    kept = ("TOOLRT_DATA_DIR", "TOOLRT_REGENERATE")
    for name in [key for key in os.environ if key.startswith("TOOLRT_") and not key.startswith(kept)]:
        del os.environ[name]  # the person's own settings (TOOLRT_AUDIT may name a file in the home directory)
    sys.addaudithook(HOME_GUARD.hook)
    HOME_GUARD.armed = True
    _bytecode_for_the_processes_tests_start()
    _coverage_floor_for_the_whole_suite_only(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WorkerHomeWrites(), "toolrt-worker-home-writes")


_ONE_WORKER = ("tests/test_store_replicas.py::",)
"""Modules whose tests share servers a session-scoped fixture starts (test_store_replicas' three
replicas): run on one worker, so that they start once per run, not once per worker."""


WORKERS_PER_CPU = 1.5
"""Workers `-n logical` (and `-n auto`) starts per CPU: a quarter to a third of the suite's time is spent
waiting (on the processes, servers and sockets its tests start, and on their timeouts), time in which
one worker per CPU left that CPU idle."""


@pytest.hookimpl(wrapper=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> Generator[None, int, int]:
    """pytest-xdist's count of CPUs, times `WORKERS_PER_CPU`, unless PYTEST_XDIST_AUTO_NUM_WORKERS
    names the count."""
    cpus: int = yield
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return cpus
    return max(cpus, round(cpus * WORKERS_PER_CPU))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n` without `--dist`: `load` scheduling (one test at a time, see `pytest_configure`), except that
    the tests of each `_ONE_WORKER` module go to one worker together, first (the largest unit).

    Not `--dist loadgroup` with `xdist_group` marks: under pytest 9 a worker can no longer rename its
    tests by group, so the marks have no effect."""
    if config.option.dist != "load" or _dist_chosen(config):
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class OneWorkerModules(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return next((module for module in _ONE_WORKER if nodeid.startswith(module)), nodeid)

    return OneWorkerModules(config, log)


def _dist_chosen(config: pytest.Config) -> bool:
    """Whether the person named a pytest-xdist scheduling (`--dist`, `-d`), on the command line or in
    PYTEST_ADDOPTS."""
    given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return any(arg == "-d" or arg == "--dist" or arg.startswith("--dist=") for arg in given)


class _WorkerHomeWrites:
    """pytest-xdist: a worker's writes under the real toolrt directories fail the whole run."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        HOME_GUARD.writes.extend(getattr(node, "workeroutput", {}).get("toolrt_home_writes", []))


_LONGEST = (
    "tests/test_conformance.py::test_the_official_conformance_suite_passes_every_tools_scenario",
    "tests/test_quality.py::test_mypy_strict_finds_nothing",
    "tests/test_docs.py::test_page_blocks_run_and_parse",
    "tests/test_bash_differential.py::test_the_analyzer_is_never_weaker_than_what_bash_did_with_the_corpus",
    "tests/test_bash_differential.py::test_generated_lines_are_never_weaker_than_bash",
    "tests/test_mutation_fuzz.py::test_mutated_shipped_files_are_located_problems",
    "tests/test_store_sessions.py::test_replicas_over_one_store_serve_one_session_round_robin_when_the_one_that_asked_dies",
)
"""The longest tests, longest first (the official MCP conformance suite, a cold mypy run, the docs pages, the
bash oracle, the config fuzzer, three replicas over one store): a long test handed out last kept one worker
running alone (a fresh-clone CI run's tail)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long fuzzing runs (`fuzz`) are left out unless `-m` names them (`pytest -m fuzz`), so any other
    `-m` (`-m 'not slow'`) still leaves them out. Under pytest-xdist the longest tests go first, then
    the other `slow` ones: its `load` scheduling then hands them out one at a time (see
    `pytest_configure`), longest first, so that the workers end together."""
    if "fuzz" not in (config.option.markexpr or ""):
        fuzz = [item for item in items if item.get_closest_marker("fuzz") is not None]
        if fuzz:
            config.hook.pytest_deselected(items=fuzz)
            items[:] = [item for item in items if item.get_closest_marker("fuzz") is None]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    for rank, prefix in enumerate(_LONGEST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(_LONGEST) + (0 if item.get_closest_marker("slow") is not None else 1)


def _bytecode_for_the_processes_tests_start() -> None:
    """With PYTHONDONTWRITEBYTECODE set (CI machines often set it), no toolrt process the tests start
    would find the package's bytecode, and each would compile it from source again (0.3 s of CPU, in
    hundreds of processes): compile it once, where Python looks for it. A process still reads bytecode
    that exists; nothing else is written."""
    if sys.dont_write_bytecode:
        import compileall

        import toolrt

        compileall.compile_dir(Path(toolrt.__file__).parent, quiet=2)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    """Collection keeps the bytecode of what it imports, PYTHONDONTWRITEBYTECODE or not: pytest rewrites the
    asserts of every test module (an AST pass and a compile per module, in every worker), and with the
    setting on it did so again in every run. Its bytecode goes to `tests/__pycache__` (ignored by git), as
    without the setting; the tests themselves run with the person's setting."""
    wrote = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = wrote


def _coverage_floor_for_the_whole_suite_only(config: pytest.Config) -> None:
    """`--cov-fail-under` (pyproject's addopts) judges the whole suite: a run of some tests (paths
    named, `-k`, `-m`, `--lf`, `--deselect`) is measured but not held to the floor."""
    plugin = config.pluginmanager.getplugin("_cov")
    if plugin is None:
        return
    whole = (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.option.keyword
        and not config.option.markexpr
        and not config.option.deselect
        and not config.getoption("lf", False)
    )
    if not whole:
        plugin.options.cov_fail_under = None


_TREE = pytest.StashKey[Path]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when anything was written under the person's own toolrt directories."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its controller judges the run
        workeroutput["toolrt_home_writes"] = HOME_GUARD.writes
        return
    if HOME_GUARD.writes:
        shown = "\n  ".join(dict.fromkeys(HOME_GUARD.writes))
        sys.stderr.write(f"\ntests wrote under the real toolrt directories (use tmp paths):\n  {shown}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    tree = config.stash.get(_TREE, None)
    if tree is not None:
        shutil.rmtree(tree, ignore_errors=True)


@pytest.fixture
def untraced() -> Iterator[None]:
    """Coverage's tracing paused for the test (`@pytest.mark.usefixtures("untraced")`): for property and
    fuzz passes, which run code the example tests cover hundreds of times over, and which line tracing
    (Python 3.11's C tracer) makes twice as slow. Not pytest-cov's `no_cover` marker, which fails under
    `--no-cov`; subprocesses the test starts are still measured."""
    import coverage

    current = coverage.Coverage.current()
    if current is None:
        yield
        return
    current.stop()
    try:
        yield
    finally:
        current.start()


@pytest.fixture(autouse=True)
def _no_frozen_heap_left() -> Iterator[None]:
    """What a test froze (`gc.freeze()`: `toolrt serve` settling its heap, the command keeping its heap until
    exit) goes back to the collector after it: a later test on the worker would find the heap frozen, which
    changes what its builds do (a paused block's objects are aged only while nothing is frozen)."""
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes truncated outputs and audit logs under its own temporary directory."""
    data = tmp_path_factory.mktemp("toolrt-data")
    monkeypatch.setenv("TOOLRT_DATA_DIR", str(data))
    # The person's own settings file ($XDG_CONFIG_HOME/toolrt/settings.yaml) must not reach the tests.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    # The test extra installs a language server (pylsp): without this, every edit of a .py file in any
    # test would start one. The language-server tests switch them on (tests/test_lsp_*.py).
    monkeypatch.setenv("TOOLRT_LSP__ENABLED", "false")
    return data


def write_project(
    root: Path,
    tools: Mapping[str, str] | None = None,
    permissions: str | None = None,
    settings: str | None = None,
    modules: Mapping[str, str] | None = None,
    *,
    builtin_tools: bool = False,
) -> Path:
    """Write `tools.d/<name>.yaml` per tool, `permissions.yaml`, `toolrt.yaml` and handler modules.

    `builtin_tools: false` is prepended to the settings unless `builtin_tools=True`. Texts are dedented.
    """
    root.mkdir(parents=True, exist_ok=True)
    if tools:
        (root / "tools.d").mkdir(exist_ok=True)
        for name, text in tools.items():
            (root / "tools.d" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    if permissions is not None:
        (root / "permissions.yaml").write_text(textwrap.dedent(permissions), encoding="utf-8")
    body = textwrap.dedent(settings or "")
    if not builtin_tools:
        body = "builtin_tools: false\n" + body
    if body.strip():
        (root / "toolrt.yaml").write_text(body, encoding="utf-8")
    for name, source in (modules or {}).items():
        path = root / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


@pytest.fixture
def collect_garbage() -> Iterator[None]:
    """A garbage collection after the test, so what it leaked is reported in it, not in a later one."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def project_writer() -> Callable[..., Path]:
    """`write_project` for fixtures of wider scope than `make_project` (no import of conftest needed)."""
    return write_project


@pytest.fixture
def make_project(tmp_path: Path) -> ProjectFactory:
    """`make_project(tools, permissions=None, settings=None, modules=None, builtin_tools=False) -> root`."""
    counter = iter(range(1_000_000))

    def factory(
        tools: Mapping[str, str] | None = None,
        permissions: str | None = None,
        settings: str | None = None,
        modules: Mapping[str, str] | None = None,
        *,
        builtin_tools: bool = False,
    ) -> Path:
        root = tmp_path / f"project{next(counter)}"
        return write_project(root, tools, permissions, settings, modules, builtin_tools=builtin_tools)

    return factory


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty project directory (tests that run a tool's handler directly work in it)."""
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def site(tmp_path: Path) -> CallSite:
    """A call site for the bash analyzer: `project/` as root and cwd, a sibling `home/`."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "home").mkdir()
    return CallSite(root=root, cwd=root, home=tmp_path / "home")
