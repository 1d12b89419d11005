"""A thread as a person names it (``liminal.lookup.names``): the one reading every command and
the dashboard's addresses share."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.lookup.names import Named, match, refusal

THREADS = [
    ("d6db1964-aaaa", ["d6db1964-aaaa", "5b0a7e22-0001", "5b0a7e22-0002"]),
    ("d6e00000-bbbb", ["d6e00000-bbbb"]),
    ("5b0a0000-cccc", []),
]


def test_ids_prefixes_and_sessions() -> None:
    assert match("d6db1964-aaaa", THREADS) == Named("d6db1964-aaaa", "5b0a7e22-0002")  # its latest
    assert match("d6db", THREADS) == Named("d6db1964-aaaa", "5b0a7e22-0002")
    assert match("5b0a7e22-0001", THREADS) == Named("d6db1964-aaaa", "5b0a7e22-0001")  # that session
    assert match("5b0a7", THREADS) == Named("d6db1964-aaaa", "5b0a7e22-0002")
    # A thread's own id first: "5b0a" starts a session of another, and this thread's id.
    assert match("5b0a", THREADS) == Named("5b0a0000-cccc", "5b0a0000-cccc")


def test_none_and_several() -> None:
    assert match("d6", THREADS) == ["d6db1964-aaaa", "d6e00000-bbbb"]
    assert match("ffff", THREADS) == []
    for blank in ("", "  "):  # a prefix of every id: names none
        assert match(blank, THREADS) == []
    assert refusal("ffff", []) == "no such thread: ffff"
    assert refusal("d6", ["a", "b"]) == "'d6' names 2 threads: a, b (give more of the id)"
    assert refusal("x", [str(n) for n in range(7)]).endswith("0, 1, 2, 3, 4, … (give more of the id)")


ids = st.text(alphabet="0123456789abcdef-", min_size=1, max_size=6)


@given(threads=st.dictionaries(ids, st.lists(ids, max_size=3), max_size=6), text=ids)
@settings(max_examples=300, deadline=None)
def test_a_thread_is_named_only_when_nothing_else_could_be(threads: dict[str, list[str]], text: str) -> None:
    found = match(text, threads.items())
    starts = {t for t, sessions in threads.items() if any(n.startswith(text) for n in [t, *sessions])}
    if isinstance(found, Named):
        names = [found.thread, *threads[found.thread]]
        assert found.thread in starts and found.session in names
        if text not in names:  # a prefix: of this thread's id alone, or of no other's names
            own = {t for t in threads if t.startswith(text)}
            assert own == {found.thread} or (not own and starts == {found.thread})
    else:
        assert len(found) != 1 and set(found) <= starts
        assert found or not starts
