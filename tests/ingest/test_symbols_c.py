"""C symbols come from the declarations of one parse: what a reader of a kernel-style file would point at."""

from __future__ import annotations

import gc
import textwrap
import tracemalloc

import pytest

from helix_context.config import Settings
from helix_context.ingest import chunk_code as chunk_module
from helix_context.ingest import symbols_tree as symbols_module
from helix_context.ingest import treesitter
from helix_context.ingest.genes import make_genes
from helix_context.ingest.symbols import find_symbols
from helix_context.models import Provenance

C_SOURCE = textwrap.dedent("""\
    #include <linux/sched.h>

    #ifdef CONFIG_SMP
    struct run_queue {
        int nr_running;
        struct rq_stats {
            long wait;
        } stats;
        union {
            int raw;
        };
    };
    #else
    typedef struct {
        int nr_running;
    } run_queue_t;
    #endif

    enum task_state { TASK_RUNNING, TASK_STOPPED };

    #define task_is_running(t) ((t)->state == TASK_RUNNING)

    extern int wake_up_process(struct task_struct *p), sched_fork(void);
    static void (*idle_hook)(int cpu);
    DEFINE_RWLOCK(tasklist_lock);

    static int pick_next(struct run_queue *rq)
    {
        struct local_view {
            int seen;
        } view;
        int (*cmp)(int, int) = NULL;
        view.seen = rq->nr_running;
        return view.seen;
    }

    const struct file_operations sched_fops = {
        .open = pick_next,
    };
    """)


@pytest.fixture(scope="module")
def c_symbols() -> dict[str, tuple[str, int, int]]:
    found = find_symbols(C_SOURCE, "code", "c")
    if not found:
        pytest.skip("no tree-sitter grammar for C in this install")
    return {s.name: (s.kind, s.start_line, s.end_line) for s in found}


def test_functions_prototypes_and_function_like_macros(c_symbols) -> None:
    assert c_symbols["pick_next"] == ("function", 27, 35)
    assert c_symbols["task_is_running"][0] == "function"
    assert c_symbols["wake_up_process"][0] == "function" and c_symbols["sched_fork"][0] == "function"


def test_structs_unions_enums_and_typedefs_with_a_body(c_symbols) -> None:
    assert c_symbols["run_queue"] == ("class", 4, 12)
    assert c_symbols["run_queue.rq_stats"] == ("class", 6, 8), "a named struct inside a struct, qualified"
    assert c_symbols["run_queue_t"] == ("class", 14, 16), "an anonymous typedef'd struct takes the typedef's name"
    assert c_symbols["task_state"] == ("class", 19, 19)


def test_nothing_from_bodies_uses_or_variables(c_symbols) -> None:
    names = set(c_symbols)
    # a function body's locals, a function pointer variable, a macro call at file level, a struct
    # that is only used (`struct task_struct *p`, `struct file_operations x = {...}`), enumerators
    for absent in ("local_view", "pick_next.local_view", "cmp", "idle_hook", "DEFINE_RWLOCK", "task_struct",
                   "file_operations", "sched_fops", "TASK_RUNNING"):
        assert absent not in names, absent
    assert not [n for n in names if "." in n and n.split(".")[0] == n.split(".")[-1]], \
        "no function repeated inside itself (pick_next.pick_next)"


def test_a_c_file_is_parsed_once_for_chunks_and_symbols(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    real = treesitter.parser_for("c")
    if real is None:
        pytest.skip("no tree-sitter grammar for C in this install")
    calls: list[int] = []

    class Counting:  # the real parser, counting its parses
        def parse(self, source, **kw):
            calls.append(1)
            return real.parse(source, **kw)

        def reset(self) -> None:
            real.reset()

    counting = Counting()
    monkeypatch.setattr(chunk_module, "parser_for", lambda language: counting)
    monkeypatch.setattr(symbols_module, "parser_for", lambda language: counting)
    text = C_SOURCE * 40  # big enough to be split at its declarations
    genes = make_genes(text, settings=settings, tagger=None, path="/src/kernel/sched.c", content_type=None,
                       project="linux", provenance=Provenance(source_kind="file"))
    assert len(genes) > 1
    assert len(calls) == 1, "the chunker and the symbol finder share one parse"
    held = [s.name for g in genes for s in g.symbols]
    assert held.count("pick_next") == 40 and held.count("run_queue") == 40
    # a different text is parsed afresh (the kept tree is only ever the last file's)
    find_symbols(C_SOURCE.replace("pick_next", "pick_first"), "code", "c")
    assert len(calls) == 2


def test_parsing_many_files_does_not_keep_their_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """py-tree-sitter keeps whatever a read callback returns; a big tree's sources must not pile up."""
    if treesitter.parser_for("c") is None:
        pytest.skip("no tree-sitter grammar for C in this install")
    # the budgeted path is what is measured here, not its time limit: tracemalloc slows every read callback
    # to near the limit, so a parse could be cancelled on a busy machine
    monkeypatch.setattr(treesitter, "_MIN_SPEED", 1_000)
    big = [(C_SOURCE.replace("pick_next", f"pick_{i}") * 400).encode() for i in range(12)]  # ~300 KB each
    small = [C_SOURCE.replace("pick_next", f"small_{i}").encode() for i in range(200)]
    assert len(big[0]) > treesitter.UNBUDGETED_BYTES, "the large files must take the budgeted path"
    parser = treesitter.parser_for("c")
    treesitter.parse_within_budget(parser, big[0])  # the per-thread buffer, allocated once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for src in big + small:
            tree = treesitter.parse_within_budget(parser, src)
            assert tree is not None and tree.root_node.end_byte == len(src)
        del tree
        treesitter.parse_within_budget(parser, b"int x;")  # the kept tree moves on
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 400_000, f"{kept} bytes still held after parsing {sum(map(len, big + small))} bytes"
