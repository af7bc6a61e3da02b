"""Work shared inside one scope is made once a key, and made afresh outside one."""
from __future__ import annotations

import gc

from memsim.core import memo


def test_inside_a_scope_each_key_is_made_once_and_outside_every_time():
    made = []

    def make():
        made.append(1)
        return len(made)

    assert memo.remembered("k", make) == 1 and memo.remembered("k", make) == 2  # no scope: every call
    with memo.shared():
        assert memo.remembered("k", make) == 3 and memo.remembered("k", make) == 3
        with memo.shared():  # a scope inside another is the outer one
            assert memo.remembered("k", make) == 3
        assert memo.remembered("other", make) == 4
    assert memo.remembered("k", make) == 5  # the scope's values are gone with it


def test_a_value_derived_from_an_object_keeps_the_object_so_its_id_is_not_reused():
    class Thing:
        pass

    with memo.shared():
        first = Thing()
        kept = memo.derived("name", first, id)
        del first
        gc.collect()
        others = [Thing() for _ in range(1000)]  # none may take the id of the first while the scope holds it
        assert all(memo.derived("name", o, lambda t: -1) == -1 for o in others)
        assert kept not in {id(o) for o in others}
