"""bench.cross_file's choice of cross-file cuts: a middle that uses a name its file
imports from its own package, outside imports, strings and comments."""

from __future__ import annotations

from bench.cross_file import code_names, package_names, uses_package_names

MODULE = (
    "import os\n"
    "from .util import helper, Thing as T\n"
    "from shop.core import price\n"
    "from . import models\n"
    "import shop.db as db\n"
    "from other import price_of\n"
)


def test_package_names_are_those_imported_from_the_package_itself() -> None:
    assert package_names(MODULE, "shop") == {"helper", "T", "price", "models", "db"}


def test_code_names_skip_strings_and_comments_and_survive_open_fragments() -> None:
    assert code_names("x = helper('price')  # models\n") == {"x", "helper"}
    assert code_names("\n    return T(price") == {"return", "T", "price"}


def test_a_cut_counts_when_its_middle_uses_a_package_name_outside_an_import() -> None:
    assert uses_package_names("helper(1)", "y = ", MODULE, "shop")
    assert uses_package_names("\n    return db.get(1)", "def f():", MODULE, "shop")
    assert not uses_package_names("price_of(1)", "y = ", MODULE, "shop")  # another package's
    assert not uses_package_names("'helper'", "y = ", MODULE, "shop")  # a string
    assert not uses_package_names(" helper", "from .util import", MODULE, "shop")  # the import
