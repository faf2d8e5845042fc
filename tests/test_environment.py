"""Every environment variable is declared once and documented.

"Read" is what a scan of every Python file finds (`os.environ.get(NAME)`, `os.environ[NAME]`,
`os.getenv(NAME)`, `NAME in os.environ`, with NAME a literal or a module constant; a whole
environment handed to a child process reads no name), plus the `$NAME` expansions of our variables in
the shell scripts, the Makefiles and the chart. On the product side only the two declaration modules
read the environment; their declarations are the operator guide's tables, word for word (the tables
are generated: `make settings-docs`). What the tests, benchmarks and build scripts read is in
docs/development/environment.md, and every name there is read somewhere.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu import app_settings as gpu_settings
from plugin import environment as node
from portal.settings import environment, reference
from workloads import app_settings as workloads_settings

REPO = Path(__file__).resolve().parents[1]
DEVELOPMENT = REPO / "docs" / "development" / "environment.md"
USER_GUIDE = REPO / "docs" / "user-guide.md"
DECLARATIONS = {"portal/settings/environment.py", "plugin/environment.py"}
PRODUCT = ("portal/", "accounts/", "gpu/", "workloads/", "plugin/", "gpuctl/", "manage.py")
TEST_SETTINGS = "portal/settings_test.py"  # a test helper in the product's folder
# Product modules that read a variable that is no setting of the portal or the node daemons, and why.
PRODUCT_EXCEPTIONS = {
    ("workloads/k8s/client.py", "KUBERNETES_SERVICE_HOST"): "Kubernetes sets it in every pod: in a cluster",
    ("plugin/sim/mps.py", "CUDA_MPS_PIPE_DIRECTORY"): "CUDA's: the simulated MPS daemon reads it as the real",
    ("workloads/k8s/faults.py", "GPUPORTAL_FAULT_DIR"): "the worker-kill tests' hook (development table)",
    ("portal/management/commands/demo.py", "PORT"): "the demo's port (development table)",
    ("gpuctl/cli.py", "GPUCTL_PASSWORD"): "the CLI's (user guide)",
    ("gpuctl/http.py", "GPUCTL_CONFIG"): "the CLI's (user guide)",
}
NOT_OURS = {"HOME", "PATH", "KUBERNETES_SERVICE_HOST", "CUDA_MPS_PIPE_DIRECTORY"}
# Names of ours the docs mention that are no variable a process reads.
NOT_READ = {
    "GPUPORTAL_AGENT_TOKEN_REVIEWER": "a Django setting naming code, like AUTHENTICATION_BACKENDS",
    "GPU_PORTAL_DEVICE_IDS": "set by the device plugin in the containers it grants GPUs to",
    "GPU_PORTAL_MPS_THREAD_PERCENTAGES": "set by the device plugin in the containers it grants slices to",
}
OUR_NAME = re.compile(r"\b(?:GPU_?PORTAL|GPU)_[A-Z0-9_]*[A-Z0-9]\b")
SHELL_READ = re.compile(r"\$\{?((?:GPU_?PORTAL|GPUCTL)_[A-Z0-9_]+)")
ROW_NAMES = re.compile(r"^\| ((?:`[A-Z0-9_]+`(?:, )?)+) \|", re.M)


def tracked(*patterns: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(set(out.stdout.split()))


def _is_environ(tree: ast.AST) -> bool:
    return isinstance(tree, ast.Attribute) and tree.attr == "environ" and _is_name(tree.value, "os")


def _is_name(tree: ast.AST, name: str) -> bool:
    return isinstance(tree, ast.Name) and tree.id == name


def _key(tree: ast.AST | None) -> ast.AST | None:
    """The name expression `tree` reads the environment with, if it is such a read."""
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Attribute) and tree.args:
        method, owner = tree.func.attr, tree.func.value
        if _is_environ(owner) and method in ("get", "pop"):
            return tree.args[0]
        if _is_name(owner, "os") and method == "getenv":
            return tree.args[0]
    if isinstance(tree, ast.Subscript) and _is_environ(tree.value) and isinstance(tree.ctx, ast.Load):
        return tree.slice
    if isinstance(tree, ast.Compare) and any(_is_environ(c) for c in tree.comparators):
        return tree.left
    return None


def _opaque(tree: ast.AST) -> bool:
    """A read whose names the scan cannot see: django-environ's Env, or os.environ imported bare."""
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Attribute):
        return _is_name(tree.func.value, "environ") and tree.func.attr in ("Env", "FileAwareEnv")
    if isinstance(tree, ast.ImportFrom) and tree.module == "os":
        return any(alias.name in ("environ", "getenv") for alias in tree.names)
    return False


def reads(source: str) -> Iterator[str]:
    """The variables a module reads ("?" where the name is not a literal or a module constant)."""
    module = ast.parse(source)
    constants = {
        target.id: statement.value.value
        for statement in module.body
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
        for target in statement.targets
        if isinstance(target, ast.Name) and isinstance(statement.value.value, str)
    }
    for tree in ast.walk(module):
        key = _key(tree)
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield key.value
        elif key is not None:
            yield constants.get(key.id, "?") if isinstance(key, ast.Name) else "?"
        elif _opaque(tree):
            yield "?"


def is_product(path: str) -> bool:
    return path.startswith(PRODUCT) and "/tests/" not in path and path != TEST_SETTINGS


def python_reads() -> dict[str, set[str]]:
    """Every Python file that reads the environment, with the names it reads."""
    found: dict[str, set[str]] = {}
    for path in tracked("*.py"):
        if "/_proto/" in path or "/migrations/" in path:
            continue
        names = set(reads((REPO / path).read_text(encoding="utf-8")))
        if names:
            found[path] = names
    return found


def shell_reads() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in tracked("*.sh", "Makefile", "*.mk", "deploy/helm/*.yaml", "deploy/helm/*.tpl"):
        names = set(SHELL_READ.findall((REPO / path).read_text(encoding="utf-8")))
        if names:
            found[path] = names
    return found


def development_names() -> set[str]:
    text = DEVELOPMENT.read_text(encoding="utf-8")
    return {name for cell in ROW_NAMES.findall(text) for name in re.findall(r"`([A-Z0-9_]+)`", cell)}


def declared_names() -> set[str]:
    return set(environment.declared) | {option.env for option in node.declared()}


def test_the_guides_settings_tables_are_the_declarations() -> None:
    tables = reference.tables_in(reference.GUIDE.read_text(encoding="utf-8"))
    wanted = {variable.table for variable in environment.declared.values()} | {reference.NODE}
    assert set(tables) == wanted, "docs/operator-guide.md's settings tables and the declared tables differ"
    stale = [name for name in sorted(tables) if tables[name] != reference.table(name)]
    assert not stale, f"tables {stale} differ from the declarations: run `make settings-docs`"


def test_the_product_reads_the_environment_only_in_its_declarations() -> None:
    strays = sorted(
        f"{path}: {name}"
        for path, names in python_reads().items()
        if is_product(path) and path not in DECLARATIONS
        for name in names
        if (path, name) not in PRODUCT_EXCEPTIONS
    )
    assert not strays, f"declare these in portal/settings/environment.py or plugin/environment.py: {strays}"


def test_every_variable_read_is_documented() -> None:
    documented = declared_names() | development_names() | NOT_OURS
    documented |= {name for name in re.findall(r"`(GPUCTL_[A-Z_]+)`", USER_GUIDE.read_text(encoding="utf-8"))}
    found = {**python_reads(), **shell_reads()}
    missing = sorted(
        f"{path}: {name}"
        for path, names in found.items()
        if path not in DECLARATIONS
        for name in names - documented
    )
    assert not missing, (
        f"read, but in neither the operator guide nor docs/development/environment.md: {missing}"
    )


def test_every_development_variable_is_read_somewhere() -> None:
    read = {name for names in [*python_reads().values(), *shell_reads().values()] for name in names}
    unread = sorted(development_names() - read)
    assert not unread, f"docs/development/environment.md lists variables nothing reads: {unread}"
    assert not development_names() & declared_names(), "a declared variable belongs in the operator guide"


def test_every_declared_tunable_is_used() -> None:
    """An own setting no module reads would be a table row that does nothing (Django and allauth read
    theirs)."""
    own = [name for name in environment.declared if name.startswith(("GPUPORTAL_", "GPU_"))]
    settings = [name for name in own if hasattr(environment, name)]  # the settings of the same name
    sources = "\n".join(
        (REPO / path).read_text(encoding="utf-8")
        for path in tracked("*.py")
        if is_product(path) and path != "portal/settings/environment.py"
    )
    unused = [name for name in settings if not re.search(rf"\b{name}\b", sources)]
    assert not unused, f"declared but used nowhere: {unused}"


def test_every_variable_the_docs_name_exists() -> None:
    known = declared_names() | development_names() | set(NOT_READ)
    stale = sorted(
        f"{path}: {name}"
        for path in tracked("*.md")
        for name in set(OUR_NAME.findall((REPO / path).read_text(encoding="utf-8"))) - known
    )
    assert not stale, f"the docs name variables nothing declares: {stale}"


@pytest.mark.parametrize("module", [gpu_settings, workloads_settings], ids=lambda m: m.__name__)
def test_every_app_settings_reader_finds_its_declared_setting(module: object) -> None:
    readers = [
        function
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if not name.startswith("_") and function.__module__ == getattr(module, "__name__", "")
    ]
    assert readers
    for function in readers:
        if not inspect.signature(function).parameters:
            function()  # AttributeError for a setting nobody declared
