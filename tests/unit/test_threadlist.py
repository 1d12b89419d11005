"""``session/list`` from liminal's threads (``liminal.lookup.threadlist.listing``)."""

from __future__ import annotations

from liminal.lookup.threadlist import listing
from liminal.store.records import Thread, ThreadSummary


def summary(tid: str, title: str, cwd: str = "/p", *, backings: tuple[str, ...] = (), state: str = "active",
            last: float = 100.0) -> ThreadSummary:
    return ThreadSummary(Thread(tid, title, cwd, "claude", state, (tid, *backings), 1.0, last),
                         1, None, None, last)


def test_the_stores_threads_first_newest_first_then_what_only_the_agent_knows() -> None:
    threads = [summary("t1", "My name", backings=("b1", "b2"), last=200.0),
               summary("t2", "Older", last=100.0),
               summary("t3", "Archived", state="archived"),
               summary("t4", "Elsewhere", cwd="/other"),
               summary("b2", "a record under a backing id", last=300.0)]
    agent = [{"sessionId": "b2", "cwd": "/p", "title": "a summary as first prompt"},  # t1's rewrite
             {"sessionId": "b1", "cwd": "/p"},  # t1's earlier backing
             {"sessionId": "t3", "cwd": "/p"},  # archived
             {"sessionId": "x9", "cwd": "/p", "title": "made outside liminal"},
             {"sessionId": "x9", "cwd": "/p"},
             "junk"]
    thread_of = {"b2": "t1", "b1": "t1"}.get
    out = listing(threads, agent, lambda s: thread_of(s) or s, "/p", first_page=True)
    assert [(e["sessionId"], e.get("title")) for e in out] == [
        ("t1", "My name"), ("t2", "Older"), ("x9", "made outside liminal")]
    assert out[0]["updatedAt"].endswith("Z") and out[0]["cwd"] == "/p"
    later = listing(threads, [{"sessionId": "t2", "cwd": "/p"}, {"sessionId": "x8", "cwd": "/p"}],
                    lambda s: s, "/p", first_page=False)
    assert [e["sessionId"] for e in later] == ["x8"]  # page one had the store's threads
    everywhere = listing(threads, [], lambda s: s, None, first_page=True)
    assert {e["sessionId"] for e in everywhere} == {"t1", "t2", "t4"}


def test_a_thread_nothing_was_said_in_is_listed_only_while_open_here() -> None:
    """acpx's ``sessions new`` opens a session and never prompts it: on main every later
    listing had a blank row for it, for good."""
    said = summary("t1", "Said something", last=200.0)
    empty = ThreadSummary(Thread("e1", "", "/p", "claude", "active", ("e1",), 1.0, 300.0),
                          0, None, None, 300.0, empty=True)
    agent = [{"sessionId": "e1", "cwd": "/p"}]  # an agent that lists it too lists it no more
    out = listing([said, empty], agent, lambda s: s, "/p", first_page=True)
    assert [e["sessionId"] for e in out] == ["t1"]
    here = listing([said, empty], agent, lambda s: s, "/p", first_page=True, live={"e1"})
    assert [e["sessionId"] for e in here] == ["e1", "t1"]
