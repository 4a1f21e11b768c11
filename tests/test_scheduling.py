"""tests/conftest.py's order for `-n 2` (setup.cfg: --dist loadscope): the longest modules first,
each module's tests together and in their own order, and no stale module name in its table; and
the fast tier (`-m "not large"`) leaves out every module the table knows as long."""

import ast
import pathlib

import pytest

TESTS = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def conftest(pytestconfig):
    """tests/conftest.py as pytest loaded it (`import conftest` may name a sub-folder's conftest)."""
    plugin = pytestconfig.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    assert plugin is not None and hasattr(plugin, "MODULE_SECONDS")
    return plugin


class _Item:
    def __init__(self, module, name, large=False):
        self.path = TESTS / module
        self.name = name
        self._large = large

    def get_closest_marker(self, name):
        return object() if name == "large" and self._large else None


def test_every_module_in_the_table_exists(conftest):
    missing = [m for m in conftest.MODULE_SECONDS if not (TESTS / m).is_file()]
    assert not missing, f"tests/conftest.py MODULE_SECONDS names modules that are gone: {missing}"


def test_longest_modules_first_and_each_module_kept_together_in_order(conftest):
    items = [_Item("test_config.py", "c"), _Item("study/test_domain_study.py", "f"),
             _Item("test_config.py", "a"), _Item("new/test_new.py", "e"), _Item("new/test_new.py", "d", large=True),
             _Item("study/test_domain_study.py", "b"), _Item("test_readme_commands.py", "g")]
    conftest.pytest_collection_modifyitems(None, items)
    # domain_study (196 s) > readme (108 s) > an unlisted module with a large test (30.1 s) > test_config (0.2 s)
    assert [i.name for i in items] == ["f", "b", "g", "e", "d", "c", "a"]


def _marked_large_as_a_whole(path: pathlib.Path) -> bool:
    """Whether the module's `pytestmark` is pytest.mark.large, alone or in a list of marks."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return any(ast.unparse(mark) == "pytest.mark.large" for mark in marks)
    return False


def test_every_long_module_is_left_out_of_the_fast_tier(conftest):
    long_modules = [m for m, s in conftest.MODULE_SECONDS.items() if s >= conftest.LARGE_MODULE_SECONDS]
    assert long_modules, "MODULE_SECONDS lists no module at LARGE_MODULE_SECONDS or more: is the threshold right?"
    unmarked = [m for m in long_modules if not _marked_large_as_a_whole(TESTS / m)]
    assert not unmarked, (f"modules of {conftest.LARGE_MODULE_SECONDS} s or more (tests/conftest.py MODULE_SECONDS) "
                          f"must be `pytestmark = pytest.mark.large`, or `-m \"not large\"` is no fast tier: {unmarked}")


def test_the_large_marker_is_read_from_a_module_mark_or_a_list_of_marks(tmp_path):
    alone = tmp_path / "test_alone.py"
    alone.write_text("import pytest\n\npytestmark = pytest.mark.large\n")
    listed = tmp_path / "test_listed.py"
    listed.write_text("import pytest\n\npytestmark = [pytest.mark.large, pytest.mark.skipif(False, reason='')]\n")
    other = tmp_path / "test_other.py"
    other.write_text("import pytest\n\npytestmark = pytest.mark.skipif(False, reason='')\n\n\n"
                     "@pytest.mark.large\ndef test_one():\n    pass\n")
    assert _marked_large_as_a_whole(alone) and _marked_large_as_a_whole(listed)
    assert not _marked_large_as_a_whole(other)
